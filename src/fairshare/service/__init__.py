"""The live service: storage (SQLite or PostgreSQL), audit chain, tokens and roles, the scheduler
loop over the engine state, cluster backends, HTTP API and dashboard (`fairshare serve`).

Rooms inside the package, each importing only the rooms below it (tests/service/test_rooms.py):
`service_errors`, `timefmt`, `options` (used by all) -> `storage/` (database, schema, journal,
audit, portfolio, tokens, roles, lock) -> `clusters/` (the backend interface; demo, fake, Slurm)
-> `loop/` (the cycle, the live engine, views, checkpoints, policy in force, requests, the loop
in a thread) -> `api/` (routes, models, metrics, dashboard) -> `server`, `serve_slurm`
(`fairshare serve`), `service_cli`. Nothing here
is imported by `fairshare.cli` at start-up: the commands import it when they run, so `fairshare
check` stays fast.
"""
