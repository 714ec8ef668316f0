"""Cluster backends: the interface and its observations (backend.py) at the bottom, and beside each
other the demo cluster, the in-memory fake for tests and Slurm's backend (reading: slurm_cluster.py;
acting: slurm_actions.py)."""
