"""`fairshare serve`'s refusals: exit 2 with a message naming the option, before it listens."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from fairshare.cli import main


def serve(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["serve", *args], catch_exceptions=False)
    return res.exit_code, res.output


def test_serve_needs_a_cluster_and_a_database(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    code, out = serve("--db", db)
    assert code == 2 and "--cluster" in out
    code, out = serve("--cluster", "demo:normal")
    assert code == 2 and "--db" in out and "--demo" in out
    code, out = serve("--db", db, "--cluster", "slurm")
    assert code == 2 and "no policy is stored" in out  # checked before Slurm is asked
    code, out = serve("--db", db, "--cluster", "demo:nonesuch")
    assert code == 2 and "unknown scenario" in out and "normal" in out
    code, out = serve("--db", db, "--cluster", "demo:normal", "--speed", "0")
    assert code == 2 and "--speed" in out
    code, out = serve("--demo", "--strategy", "random")
    assert code == 2 and "unknown strategy" in out


def test_serve_refuses_a_policy_the_demo_cluster_cannot_charge(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "tree:\n  - {name: a, share: 1}\n  - {name: b, share: 1}\nclasses:\n  debug: {protected: 10m}\n"
    )
    code, out = serve(
        "--db", f"sqlite:///{tmp_path / 'x.db'}", "--cluster", "demo:normal", "--policy", str(policy)
    )
    assert code == 2 and "cannot charge" in out and "product/search" in out


def test_serve_says_when_the_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        code, out = serve(
            "--db", f"sqlite:///{tmp_path / 'x.db'}", "--cluster", "demo:eight-gpu", "--port", str(port)
        )
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--cluster", "demo:normal", "--speed", "1e300"], "at most 1,000,000"),
        (["--cluster", "demo:normal", "--speed", "nan"], "--speed"),
        (["--cluster", "demo:normal", "--seed", "99999999999"], "--seed"),
        (["--cluster", "slurm", "--interval", "1e300"], "between 1 and 86,400"),
    ],
    ids=["speed-huge", "speed-nan", "seed-huge", "interval-huge"],
)
def test_serve_bounds_its_numbers_by_the_limits(tmp_path: Path, args: list[str], says: str) -> None:
    code, out = serve("--db", f"sqlite:///{tmp_path / 'x.db'}", *args)
    assert code == 2 and says in out, out


def test_token_create_bounds_its_expiry(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    res = CliRunner().invoke(
        main, ["token", "create", "--db", db, "--role", "viewer", "--expires", "99999999d"]
    )
    assert res.exit_code == 2 and "--expires" in res.output and "10 years" in res.output, res.output
