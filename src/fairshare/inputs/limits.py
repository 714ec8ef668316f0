"""Every bound on an input number, in one place (README "Limits and bad input", docs/formats.md).

Each input is checked against these at load time: a value outside its range is an input error that
names the file and the key path or line and column (exit code 2). The ranges are wide enough for any
real GPU cluster and every shipped input (built-in scenarios, examples, the Philly and openb
traces), and narrow enough that no input can make a replay hang, run out of memory or divide by
zero: what each one protects is said beside it.
"""

from __future__ import annotations

YEAR = 365 * 86400.0

# --- cluster ---------------------------------------------------------------------------------
#: Nodes in a cluster, all pools together. The largest GPU clusters built have a few tens of
#: thousands of nodes (e.g. 100,000+ GPUs on 8-GPU nodes); a replay keeps a few objects per node.
MAX_NODES = 100_000
#: GPUs per node. Servers have 8 (HGX), 16 (DGX-2) or 4; a 72- or 576-GPU NVLink rack described as
#: one node still fits. Placement keeps one list entry per possible free-GPU count of a node.
MAX_NODE_GPUS = 1_024
#: CPUs per node (0 = CPUs not tracked). Large servers have a few hundred.
MAX_NODE_CPUS = 100_000.0
#: Memory per node in GB (0 = memory not tracked). The largest single servers have 32-64 TB.
MAX_NODE_MEM_GB = 1_000_000.0
#: Drain (maintenance) entries in one cluster file.
MAX_MAINTENANCE = 100_000
#: Dates and datetimes (epoch, review, expiry, drains): years from .. to (ISO dates in this range
#: are written alike everywhere; no replay runs in the last century).
MIN_YEAR = 1970
MAX_YEAR = 2199

# --- time ------------------------------------------------------------------------------------
#: Instants on the replay clock (submit, deadline, drain start/deadline/end, horizon): 0 .. 10
#: years. The whole Philly trace repeated 16 times spans 4.8 years. The replay samples its series
#: every 15 minutes up to the last instant (350,000 samples in 10 years).
MAX_TIME = 10 * YEAR
#: Durations (work, estimate, stall_after, the class contract, the window, scheduling knobs): up to
#: 10 years (a job running longer is not a job).
MAX_DURATION = 10 * YEAR

# --- policy ----------------------------------------------------------------------------------
#: The rolling window: 1 hour .. MAX_DURATION. The ledger splits it into 168 buckets; a window of
#: seconds would make every step roll them all.
MIN_WINDOW = 3600.0
#: decay_period (Slurm's PriorityCalcPeriod, whose unit is minutes): at least 1 second.
MIN_DECAY_PERIOD = 1.0
#: Shares and exceptions' extra shares: MIN_SHARE .. MAX_SHARE, and the largest at most
#: MAX_SHARE_RATIO times the smallest over the whole policy. Shares are relative weights (the trace
#: loaders use GPU-hours, up to ~10^6); a 10^9 ratio still leaves every static fraction and every
#: water-filling sum far from float overflow and underflow.
MIN_SHARE = 1e-6
MAX_SHARE = 1e12
MAX_SHARE_RATIO = 1e9
#: Levels of the budget tree (program -> project -> researcher is 3; Slurm account trees rarely
#: reach 10). Also bounds the nesting of every YAML file (MAX_YAML_DEPTH).
MAX_TREE_DEPTH = 16
#: Tree nodes (groups) in a policy.
MAX_GROUPS = 100_000
#: Job classes in a policy.
MAX_CLASSES = 1_000
#: GPU rates (GPU-equivalents per GPU): GPU generations differ by less than 100x in throughput.
MIN_RATE = 1e-3
MAX_RATE = 1e3
#: Gates: share_floor is a ratio of delivered to owed (1 = exactly the share).
MAX_SHARE_FLOOR = 10.0
#: exception_max_days: up to MAX_DURATION.
MAX_EXCEPTION_DAYS = MAX_DURATION / 86400
#: Slurm-multifactor weights (Slurm's own are 32-bit integers).
MAX_WEIGHT = 4_294_967_295.0
#: Counts of jobs among the scheduling knobs (`preempt_budget`, `max_reservations`,
#: `bf_max_job_test`): 0 .. this (a count above the jobs a workload may hold means no limit).
MAX_JOB_COUNT_KNOB = 2_000_000
#: `bf_resolution`: at least 1 second (a run past its time limit is planned to end this long from
#: now; 0 would plan it to end now, forever).
MIN_BF_RESOLUTION = 1.0

# --- workload --------------------------------------------------------------------------------
#: Jobs in one workload (after --repeat). 16 repeats of the whole Philly trace are 1.3 M jobs and
#: take 4 GB in a replay (docs/benchmarks.md), so 2 M take about 6 GB.
MAX_JOBS = 2_000_000
#: GPUs of one job: no cluster within the limits has more.
MAX_JOB_GPUS = MAX_NODES * MAX_NODE_GPUS
#: CPUs and memory (GB) of one job: likewise.
MAX_JOB_CPUS = MAX_NODES * MAX_NODE_CPUS
MAX_JOB_MEM_GB = MAX_NODES * MAX_NODE_MEM_GB

# --- text and files --------------------------------------------------------------------------
#: Characters in a name (group, class, GPU type, pool, job id, user, node) and in free text
#: (owner, approver, reason, hypothesis).
MAX_NAME_CHARS = 256
MAX_TEXT_CHARS = 10_000
#: Nesting of mappings and lists in a YAML file (a tree of MAX_TREE_DEPTH levels nests 2 x 16 + 1).
MAX_YAML_DEPTH = 64
#: Values in a YAML file once aliases are expanded (a file of a few KB whose aliases expand to
#: billions of values would otherwise take forever to check).
MAX_YAML_VALUES = 1_000_000

#: Bytes in one input file (after gzip decompression). Tables (workloads, traces) are read line by
#: line: a 2,000,000-job workload with every column is about 400 MB. A larger file is refused from
#: its size before it is read; the environment variable FAIRSHARE_MAX_INPUT_BYTES overrides this and
#: MAX_YAML_BYTES (fairshare.inputs.reader).
MAX_INPUT_BYTES = 1 << 30
#: Bytes in one YAML file (policy, cluster), which is parsed whole: a policy of MAX_GROUPS groups
#: with owners, reviews and hypotheses is about 20 MB.
MAX_YAML_BYTES = 64 << 20
#: Bytes in one line of a table (a workload row has at most 18 cells of at most MAX_TEXT_CHARS).
MAX_LINE_BYTES = 1 << 20

# --- command line ----------------------------------------------------------------------------
#: --repeat of a trace window.
MAX_REPEAT = 1_000
#: `serve --speed`: simulated seconds per real second (1e6: a year of a demo cluster in 32 s; more
#: makes a pass's instants coarser than the engine's timers).
MAX_SPEED = 1e6
#: --seed of the built-in scenarios (numpy takes any non-negative integer; this is its 32-bit range).
MAX_SEED = 2**32 - 1
#: --overstate LOW:HIGH: declared run times are the true ones times a factor in this range. Users
#: overstate their time limits 2-10x, some 100x; below 1 they understate them (the run is killed at
#: its limit on a real cluster). Outside it, estimates are of no cluster (1e308 overflows to inf).
MIN_OVERSTATE = 1e-3
MAX_OVERSTATE = 1e6
#: --forecast N: forecast the start of about N jobs (each copies the engine and runs it forward,
#: within the budget below).
MAX_FORECAST = 100_000
#: The forecasts of a replay do at most this many units of work per unit of the replay so far (an
#: instant or a scheduling pass; a forecast's run-forward counts its instants and passes alike,
#: and its copy of the engine one unit per eight jobs and nodes), and each at least
#: FORECAST_MIN_UNITS beyond its copy: the forecast never takes longer than about this multiple
#: of the replay. A forecast out of budget says "no start in the run-forward" (start_at null).
FORECAST_PASS_MULTIPLE = 4
FORECAST_MIN_UNITS = 200

# --- service (API query parameters and the service commands) ---------------------------------
#: `/api/jobs?limit`: jobs in one answer (the queue beyond it is counted, not listed).
MAX_JOBS_PAGE = 10_000
#: `/api/decisions?limit`: audit records in one page (`next_after` pages on).
MAX_DECISIONS_PAGE = 1_000
#: `/api/review?days` and `fairshare review --days`: the expiry horizon, 0 .. the longest duration
#: in days (an exception cannot last longer).
MAX_REVIEW_DAYS = MAX_DURATION / 86400
#: Counters and ids the API takes (progress `step`/`from_step`, record and version ids, a page's
#: `after`): 0 .. 2^53, the integers a JSON number (a double) carries exactly.
MAX_COUNTER = 2**53

# --- output folders --------------------------------------------------------------------------
#: A complete.json (a marker listing a folder's files): a replay's lists 6 files, a compare
#: output's one file per replay folder; anything larger is not one of ours.
MAX_MARKER_BYTES = 1 << 20
#: One file of an output folder: 2,000,000 jobs write about 2 GB of events.jsonl.
MAX_OUTPUT_FILE_BYTES = 16 << 30
#: Entries (files and folders) in an output folder: a compare of every scenario under every
#: policy holds a few hundred.
MAX_OUTPUT_ENTRIES = 100_000


def fmt_limit(x: float) -> str:
    """A limit as people write it: 100,000; 1e+12; 10 years (315,360,000 s)."""
    if x >= YEAR and x % YEAR == 0:
        return f"{x / YEAR:g} years ({int(x):,} s)"
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:g}"
