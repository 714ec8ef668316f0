"""The live service: storage (SQLite or PostgreSQL), audit chain, tokens and roles, the scheduler
loop over the engine state, cluster backends, HTTP API and dashboard (`fairshare serve`).

Layers inside the package, each importing only those above it in this list:
`errors`, `timefmt` -> `db`, `schema` -> `audit`, `journal`, `portfolio`, `tokens`, `roles`, `lock`
-> `store`, `review`, `clock` -> `liveengine` (the engine with the live calls), `backend` (the
cluster interface), `submissions`, `inforce`, `views` -> `demo`, `fake` (clusters) -> `loop` (the
scheduler loop) -> `live`, `metrics` -> `api/` -> `server` (`fairshare serve`), `cli`. Nothing here
is imported by `fairshare.cli` at start-up: the commands import it when they run, so `fairshare
check` stays fast.
"""
