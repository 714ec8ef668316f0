"""The scheduler loop: the cycle (cycle.py) over the live engine, the published views, checkpoints, the
policy in force, retention, users' requests, and the loop in a thread for the API (live_service.py)."""
