"""The operator's everyday commands over the live API (issue 18): `fairshare status`, `fairshare
jobs [--group G] [--state pending]`, `fairshare jobs explain ID`, `fairshare exception
grant|list|end`, `fairshare policy diff FILE`. They read the API of a running `serve` with a token:
`--url`/`--token` or FAIRSHARE_URL/FAIRSHARE_TOKEN. Output: text on stdout, `--json` for the API's
answer as is; an error is one line on stderr, exit 2 for a refused request (4xx), 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click

URL_HELP = "The serve's address (default FAIRSHARE_URL, else http://127.0.0.1:8080)."
TOKEN_HELP = "A token (default FAIRSHARE_TOKEN)."


def _fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


class Api:
    """GET/POST on the API; `client` is an httpx.Client (tests pass the app's own TestClient)."""

    def __init__(self, url: str, token: str | None, client: Any = None) -> None:
        if not token:
            _fail("no token: give --token or set FAIRSHARE_TOKEN (fairshare token create ...)")
        import httpx

        self.headers = {"Authorization": f"Bearer {token}"}
        self.client = client if client is not None else httpx.Client(base_url=url.rstrip("/"), timeout=30.0)
        self.url = url

    def call(self, method: str, path: str, **kw: Any) -> Any:
        import httpx

        try:
            r = self.client.request(method, path, headers=self.headers, **kw)
        except httpx.HTTPError as exc:
            _fail(f"{self.url}: {exc}", 1)
        if r.status_code >= 400:
            try:
                body = r.json()
                message = body.get("message") or body.get("detail") or r.text
            except ValueError:
                message = r.text[:300]
            _fail(f"{method} {path}: HTTP {r.status_code}: {message}", 2 if r.status_code < 500 else 1)
        return r.json() if r.content else None


def _api(ctx: click.Context, url: str | None, token: str | None) -> Api:
    obj = ctx.obj if isinstance(ctx.obj, dict) else {}
    return Api(url or "http://127.0.0.1:8080", token, obj.get("http"))


def _conn(f: Any) -> Any:
    f = click.option("--token", envvar="FAIRSHARE_TOKEN", help=TOKEN_HELP)(f)
    f = click.option("--url", envvar="FAIRSHARE_URL", help=URL_HELP)(f)
    return click.option("--json", "as_json", is_flag=True, help="The API's answer as JSON.")(f)


def _out(data: Any, as_json: bool, text: str) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False) if as_json else text)


# ---------------------------------------------------------------------------------------------- status
@click.command("status")
@_conn
@click.pass_context
def status(ctx: click.Context, url: str | None, token: str | None, as_json: bool) -> None:
    """The loop (role, last pass, errors), the cluster and the queue."""
    s = _api(ctx, url, token).call("GET", "/api/status")
    loop = s.get("loop", {})
    lines = [
        f"loop: {s['role']}{' (healthy)' if loop.get('healthy', True) else ' (FAILING)'}, "
        f"last pass {loop.get('last_pass_ok') or 'none yet'}, {loop.get('passes', 0)} passes, "
        f"{loop.get('errors_total', 0)} errors",
        f"clock: {s['now']} (x{s['speed']:g}), view as of {s['as_of']}",
        f"cluster: {s['backend']}, {s['gpus_busy']} of {s['gpus']} GPUs busy",
        f"queue: {s['pending_jobs']} waiting, {s['running_jobs']} running",
    ]
    if loop.get("error"):
        lines.append(f"error now: {loop['error']}")
    elif loop.get("last_error"):
        lines.append(f"last error: {loop['last_error']} at {loop.get('last_error_at')}")
    for ex in s.get("exceptions_in_force", []):
        lines.append(f"exception in force: {ex['group']} +{ex['extra_share']:g} until {ex['expires']}")
    _out(s, as_json, "\n".join(lines))


# ------------------------------------------------------------------------------------------------ jobs
@click.group("jobs", invoke_without_command=True)
@click.option("--group", help="A tree node: its jobs and those under it.")
@click.option(
    "--state",
    type=click.Choice(["pending", "running", "ended", "active", "all"]),
    default="active",
    show_default=True,
)
@_conn
@click.pass_context
def jobs(
    ctx: click.Context, group: str | None, state: str, url: str | None, token: str | None, as_json: bool
) -> None:
    """The queue in fair-share order and the running jobs (like squeue), or `jobs explain ID`."""
    if ctx.invoked_subcommand is not None:
        return
    params = {"state": state} | ({"group": group} if group else {})
    data = _api(ctx, url, token).call("GET", "/api/jobs", params=params)
    rows = [
        f"{'#':>4}  {'job':<32} {'group':<20} {'class':<8} {'user':<10} {'gpus':>4}  {'state':<9} estimate"
    ]
    for j in data["jobs"]:
        est = j.get("estimate_s")
        rows.append(
            f"{j.get('position') or '':>4}  {j['id']:<32} {j['group']:<20} {j.get('class') or '':<8} "
            f"{j.get('user') or '':<10} {j['gpus']:>4}  {j['state']:<9} "
            + (f"{est / 3600:.1f}h" if isinstance(est, int | float) else "")
        )
    rows.append(f"{data['total']} job(s)")
    _out(data, as_json, "\n".join(rows))


@jobs.command("explain")
@click.argument("job_id")
@_conn
@click.pass_context
def jobs_explain(ctx: click.Context, job_id: str, url: str | None, token: str | None, as_json: bool) -> None:
    """Why a job waits: place in line, the groups ahead, the forecast start (squeue --start + sprio)."""
    ex = _api(ctx, url, token).call("GET", f"/api/jobs/{job_id}/explain")
    lines = [ex["summary"]]
    for g in ex.get("loses_to") or []:
        lines.append(f"  {g['jobs_ahead']} job(s) of {g['group']} ahead: {g['why']}")
    _out(ex, as_json, "\n".join(lines))


# ------------------------------------------------------------------------------------------- exception
@click.group("exception")
def exception() -> None:
    """Grant, list and end share exceptions through the API."""


@exception.command("grant")
@click.argument("group")
@click.option("--extra-share", type=float, required=True, help="Share added to the group's.")
@click.option("--expires-in", help="A duration from now, e.g. 7d.")
@click.option("--expires", help="A date or datetime (UTC).")
@click.option("--reason", required=True)
@_conn
@click.pass_context
def exception_grant(
    ctx: click.Context,
    group: str,
    extra_share: float,
    expires_in: str | None,
    expires: str | None,
    reason: str,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Grant GROUP an extra share until an expiry (the caller is the approver; audited)."""
    body: dict[str, Any] = {"group": group, "extra_share": extra_share, "reason": reason}
    body |= {"expires_in": expires_in} if expires_in else {}
    body |= {"expires": expires} if expires else {}
    ex = _api(ctx, url, token).call("POST", "/api/exceptions", json=body)
    _out(ex, as_json, f"exception {ex['id']}: {ex['group']} +{ex['extra_share']:g} until {ex['expires_at']}")


@exception.command("list")
@click.option(
    "--status", "which", type=click.Choice(["active", "expired", "all"]), default="active", show_default=True
)
@_conn
@click.pass_context
def exception_list(ctx: click.Context, which: str, url: str | None, token: str | None, as_json: bool) -> None:
    """Exceptions, oldest first."""
    rows = _api(ctx, url, token).call("GET", "/api/exceptions", params={"status": which})
    text = "\n".join(
        f"{x['id']:>4}  {x['group']:<24} +{x['extra_share']:<8g} until {x['expires_at']}  {x['reason']}"
        for x in rows
    )
    _out(rows, as_json, text or "no exceptions")


@exception.command("end")
@click.argument("exception_id", type=int)
@click.option("--reason")
@_conn
@click.pass_context
def exception_end(
    ctx: click.Context,
    exception_id: int,
    reason: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """End an exception now (audited)."""
    body = {"reason": reason} if reason else {}
    ex = _api(ctx, url, token).call("POST", f"/api/exceptions/{exception_id}/expire", json=body)
    _out(ex, as_json, f"exception {ex['id']} ended")


# --------------------------------------------------------------------------------------------- policy
@click.command("diff")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@_conn
@click.pass_context
def policy_diff(ctx: click.Context, file: str, url: str | None, token: str | None, as_json: bool) -> None:
    """The change pushing FILE would make to the live policy, node by node."""
    from ..errors import InputError
    from .storage.policy_diff import diff_policies

    with open(file, encoding="utf-8") as f:
        new = f.read()
    try:
        diff_policies(new, new, file)  # the file is read before the API is asked
        cur = _api(ctx, url, token).call("GET", "/api/policy")
        changes = diff_policies(cur["text"], new, file)
    except InputError as exc:
        _fail(str(exc))
    _out(changes, as_json, "\n".join(changes) or "no change")


def register(main: click.Group) -> None:
    for command in (status, jobs, exception):
        main.add_command(command)
    policy = main.commands.get("policy")
    if isinstance(policy, click.Group):
        policy.add_command(policy_diff)
