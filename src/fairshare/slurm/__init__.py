"""The Slurm driver's foundation (DESIGN §5 "Slurm"; docs/slurm.md).

backend.py    the narrow cluster interface (SlurmBackend) and its implementation on Slurm's commands
commands.py   running a command: timeout, typed errors (errors.py), per-job outcomes
parse.py      what Slurm 22.05 prints -> model.py's dataclasses (Slurm's terms)
fake.py       FakeSlurm: the same interface in memory, with faults, for fast tests
mapping.py    Slurm -> the policy's terms: JobRequest, RunningJob, NodeView, UsageInterval
comment.py    the contract in a job's comment (fairshare:protect=30m,...)
accounts.py   accounts <-> leaves of the budget tree
priority.py   the core's order -> Slurm priorities (fewest updates); rollback
check.py      `fairshare slurm check`: settings, permission, accounts, QOS, GPU types
devconf.py, devcluster.py, procs.py   `fairshare slurm dev-cluster`: a local Slurm, stopped by pid
cli.py        the `fairshare slurm` commands

Nothing here imports the engine: the engine and the service consume these dataclasses.
"""
