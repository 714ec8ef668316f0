"""`fairshare import slurm`: a Slurm site's accounting, associations, settings and nodes read into a
site folder (policy.yaml, cluster.yaml, workload.csv, history.csv, incumbent.yaml, import.json;
/work/coord/site-contract.md, docs/own-cluster.md).

One module per input: sacct.py (accounting), assoc.py (associations), settings.py (scontrol show
config or slurm.conf), nodes.py (scontrol -o show node or slurm.conf NodeName lines); site.py turns
what they read into the folder, command.py is the command. Each reader detects its input's form from the
content and reports a bad row as an InputError naming the file, line and column.
"""
