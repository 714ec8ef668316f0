#!/bin/bash
# Captures the real Slurm output the site-import tests read (tests/test_site_readers.py, test_site_import.py).
# Run from the repository root as root, with nothing else holding the dev cluster:
#   flock /tmp/fairshare-slurm.lock tests/data/slurm-site/capture.sh
# Brings up the dev cluster (4 nodes x 8 a100), submits ~40 jobs of 1/2/4/8/16 GPUs on three
# accounts (an array, a requeued job, a het job, a CPU-only job, a job cancelled while pending),
# waits for them, captures the site commands' output here, and brings the cluster down.
set -euo pipefail
OUT=$(cd "$(dirname "$0")" && pwd)
BASE=${FAIRSHARE_SLURM_DIR:-/tmp/fairshare-slurm-capture}
FS=${FS:-$PWD/.venv/bin/fairshare}
trap '$FS slurm dev-cluster down --dir "$BASE" >&2 || true' EXIT
eval "$($FS slurm dev-cluster up --dir "$BASE" --fresh)"
export TZ=UTC
cd "$(mktemp -d)"  # the jobs' slurm-<id>.out files go there
accts=(product research platform)
qos=(train eval debug)
gpus=(1 2 4 8 1 2 1 4)
for i in $(seq 0 29); do
  a=${accts[$((i % 3))]}; q=${qos[$((i % 3))]}; g=${gpus[$((i % 8))]}
  secs=$(( 5 + (i * 7) % 20 ))
  sbatch -Q -A "$a" --qos="$q" --gres=gpu:"$g" -c 2 --mem=4G --time=$(( 2 + i % 3 )) \
    -J "j$i" --comment "fairshare:class=$q" --wrap "sleep $secs"
done
# a 2-node gang of 16 GPUs, an array, a CPU-only job, a het job
sbatch -Q -A research --qos=train -N 2 --gres=gpu:8 --time=2 -J gang --wrap "sleep 10"
sbatch -Q -A product --qos=eval --gres=gpu:1 --time=1-00:00:00 --array=0-3 -J arr --wrap "sleep 6"
sbatch -Q -A platform --qos=debug -c 1 --time=1 -J cpuonly --wrap "sleep 3"
sbatch -Q -A platform --qos=debug --gres=gpu:1 --time=1 -J het : --gres=gpu:2 --time=1 --wrap "sleep 5" || true
# a requeued job: requeue once it runs
rq=$(sbatch --parsable -A research --qos=train --gres=gpu:2 --time=3 --requeue -J requeued --wrap "sleep 20")
# cancelled while pending (for Resources: it wants the whole cluster while it is busy)
cp=$(sbatch --parsable -A product --qos=train -N 4 --gres=gpu:8 --time=1 -J cancelled --wrap "sleep 1")
sleep 2; scancel "$cp"
for _ in $(seq 1 60); do
  st=$(squeue -h -j "$rq" -o %T || true)
  [ "$st" = RUNNING ] && break; sleep 2
done
sleep 3; scontrol requeue "$rq"
# a job cancelled while running
cr=$(sbatch --parsable -A platform --qos=eval --gres=gpu:1 --time=5 -J cancelrun --wrap "sleep 300")
for _ in $(seq 1 60); do
  st=$(squeue -h -j "$cr" -o %T || true)
  [ "$st" = RUNNING ] && break; sleep 2
done
sleep 2; scancel "$cr"
# a job that times out (time limit 1 minute)
sbatch -Q -A research --qos=debug --gres=gpu:1 --time=1 -J timeout --wrap "sleep 200"
# wait for everything
for _ in $(seq 1 200); do
  n=$(squeue -h | wc -l); [ "$n" = 0 ] && break; sleep 3
done
sleep 5
SPAN=(-S "$(date -u -d '-2 hours' +%FT%T)" -E now)
NARROW=JobID,Account,User,Partition,QOS,Submit,Eligible,Start,End,Elapsed,State,AllocTRES,ReqTRES,NNodes,NodeList,Timelimit,Comment
sacct -a -X -P "${SPAN[@]}" --format=ALL > "$OUT/sacct-all.txt"
sacct -a -X -P -D "${SPAN[@]}" --format="$NARROW" > "$OUT/sacct-duplicates.txt"
SLURM_TIME_FORMAT=%s sacct -a -X -P -D "${SPAN[@]}" --format="$NARROW" > "$OUT/sacct-epoch.txt"
sacct -a -P "${SPAN[@]}" --format="$NARROW" > "$OUT/sacct-steps.txt"
sacctmgr -P show assoc > "$OUT/assoc.txt"
sacctmgr -i dump "$(scontrol show config | awk '/^ClusterName/ {print $3}')" file="$OUT/assoc-dump.cfg" >/dev/null
scontrol show config > "$OUT/config.txt"
scontrol -o show node > "$OUT/nodes.txt"
sed 's/^# written by.*$/# the dev cluster slurm.conf (paths as captured)/' "$SLURM_CONF" > "$OUT/slurm.conf"
squeue -h | wc -l >&2
echo "captured into $OUT" >&2
