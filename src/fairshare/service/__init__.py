"""The live service: storage (SQLite or PostgreSQL), audit chain, tokens and roles, HTTP API.

Layers inside the package, each importing only those above it in this list:
`errors`, `timefmt` -> `db`, `schema` -> `audit`, `journal`, `portfolio`, `tokens`, `roles`, `lock`
-> `store`, `review` -> `api/`, `cli`. Nothing here is imported by `fairshare.cli` at start-up:
the commands import it when they run, so `fairshare check` stays fast.
"""
