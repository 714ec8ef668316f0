"""Checkpoints of the live engine: recovery loads the newest valid one, then replays the journal tail.

The journal grows without bound (an event per engine call), so a restart, or a follower's start,
that replayed it from its first `setup` record would take longer every month. The writer stores the
engine state every so often (`LoopOptions.checkpoint_events` journal events or
`checkpoint_s` wall seconds), in a transaction of its own after a cycle's write-ahead commit: a
crash before or during it leaves the previous checkpoint, and the journal stays the record.

A checkpoint is the `LiveEngine` pickled (its journal buffer and its policy lookup detached:
`LiveEngine.__getstate__`) and zlib-compressed, with its sha256, the seq of the last journal event
it covers, the engine's instant and the version of the code that wrote it (`code_version()`).

Unpickling runs code named in the data: it is only safe from a trusted source. The checkpoints are
read from the service's own database, which is trusted as the journal and the audit chain are (whoever
can write it can rewrite the ledger anyway); never load one from anywhere else.

`restore` uses a checkpoint only if its version equals the running code's and its digest matches;
anything else (another version, a digest mismatch, a checkpoint beyond the journal, an error while
loading) is logged and skipped, and recovery falls back to an older checkpoint or the full replay:
a checkpoint never stops the service from starting.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import pickle
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, select

from ... import __version__
from ...inputs.policy import Policy
from ..storage import schema
from ..storage.db import Tx, new_id
from ..storage.store import Store
from .live_engine import LiveEngine

log = logging.getLogger("fairshare.service.loop.checkpoint")

# Bump when the engine's shape changes (attributes added, renamed or retyped in EngineState,
# LiveEngine or what they hold): a checkpoint of another shape is then ignored, not misread.
# 2: LiveEngine.ended_q (retention); 3: the service in rooms (the pickle's module paths moved) and
# JobState.requeue_boost (issue 20); 4: LiveEngine holds its engine state (`LiveEngine.state`);
# 5: Knobs.larger_victims (a slotted dataclass: an old pickle's values would shift by one field);
# 6: Knobs.requeue_first_after (added without a bump) and Knobs.requeue_reserve_gpus; 7:
# Knobs.requeue_first_when_backlogged, PendingQueues.fresh and the timer kind "backlog". The shape per
# FORMAT is recorded in tests/service/test_checkpoint_shape.py, which fails on a change without one.
FORMAT = 7


def code_version() -> str:
    """The version a checkpoint must carry to be used: this fairshare, the checkpoint format, and the
    Python and numpy whose pickles it holds."""
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return f"fairshare {__version__}; checkpoint {FORMAT}; python {py}; numpy {np.__version__}"


@dataclass(frozen=True)
class Stored:
    """A stored checkpoint's header (its state is read separately)."""

    id: int
    seq: int
    t: float
    version: str
    sha256: str
    size: int
    created_t: float


def dump(engine: LiveEngine) -> bytes:
    """The engine as a checkpoint's state: pickled (see LiveEngine.__getstate__), compressed."""
    return zlib.compress(pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL), 3)


def load(state: bytes, policies: Callable[[str], Policy]) -> LiveEngine:
    """An engine from a checkpoint's state. Trusted input only: the service's own database."""
    engine = pickle.loads(zlib.decompress(state))  # our own database: see the module's docstring
    if not isinstance(engine, LiveEngine):
        raise TypeError(f"a checkpoint holds a {type(engine).__name__}, not a LiveEngine")
    engine.policies = policies
    engine.state.journal = None
    return engine


def write(
    tx: Tx,
    seq: int,
    engine: LiveEngine,
    keep: int = 3,
    state: bytes | None = None,
    version: str | None = None,
) -> Stored:
    """Store a checkpoint of `engine` covering the journal up to `seq`; keep the newest `keep`."""
    blob = dump(engine) if state is None else state
    head = Stored(
        0,
        int(seq),
        float(engine.t),
        code_version() if version is None else version,
        hashlib.sha256(blob).hexdigest(),
        len(blob),
        float(tx.now),
    )
    values = {k: v for k, v in dataclasses.asdict(head).items() if k != "id"}
    res = tx.conn.execute(schema.checkpoint.insert().values(state=blob, **values))
    stored = dataclasses.replace(head, id=new_id(res))
    prune(tx, keep)
    return stored


def prune(tx: Tx, keep: int) -> int:
    """Delete all but the newest `keep` checkpoints (by seq, then id); how many were deleted."""
    c = schema.checkpoint.c
    ids = [int(i) for (i,) in tx.conn.execute(select(c.id).order_by(c.seq.desc(), c.id.desc()))]
    old = ids[max(1, keep) :]
    if old:
        tx.conn.execute(schema.checkpoint.delete().where(c.id.in_(old)))
    return len(old)


def headers(tx: Tx) -> list[Stored]:
    """The stored checkpoints, newest first."""
    c = schema.checkpoint.c
    q = select(c.id, c.seq, c.t, c.version, c.sha256, c.size, c.created_t).order_by(c.seq.desc(), c.id.desc())
    return [
        Stored(int(r.id), int(r.seq), float(r._mapping["t"]), str(r.version), str(r.sha256), int(r.size),
               float(r.created_t))
        for r in tx.conn.execute(q)
    ]  # fmt: skip


def state_of(tx: Tx, id_: int) -> bytes:
    c = schema.checkpoint.c
    return bytes(tx.conn.execute(select(c.state).where(c.id == id_)).scalar_one())


def restore(tx: Tx, policies: Callable[[str], Policy]) -> tuple[LiveEngine, Stored] | None:
    """The newest valid checkpoint's engine (and its header), or None: replay the whole journal.
    Never raises for a bad checkpoint: it is logged and skipped (see the module's docstring)."""
    try:
        stored = headers(tx)
        last = tx.conn.execute(select(func.max(schema.journal.c.seq))).scalar()
    except Exception:
        log.exception("cannot read the checkpoints: replaying the whole journal")
        return None
    want = code_version()
    for h in stored:
        what = f"checkpoint {h.id} (journal seq {h.seq})"
        if h.version != want:
            log.warning("%s ignored: written by %r, this is %r", what, h.version, want)
            continue
        if last is None or h.seq > int(last):
            log.warning("%s ignored: the journal ends at seq %s", what, last)
            continue
        try:
            blob = state_of(tx, h.id)
            digest = hashlib.sha256(blob).hexdigest()
            if digest != h.sha256:
                log.warning("%s ignored: its sha256 is %s, stored %s", what, digest[:12], h.sha256[:12])
                continue
            engine = load(blob, policies)
            if engine.t != h.t:
                log.warning("%s ignored: its engine is at %r, stored %r", what, engine.t, h.t)
                continue
        except Exception:
            log.exception("%s ignored: it cannot be loaded", what)
            continue
        return engine, h
    if stored:
        log.warning("no usable checkpoint among %d: replaying the whole journal", len(stored))
    return None


class Checkpoints:
    """A loop's checkpoints: the rebuild's start (`restore`), the writer's cadence and writes
    (`after_cycle`). `seq` is the journal seq of the newest checkpoint written or loaded (0: none)."""

    def __init__(
        self,
        store: Store,
        wall: Callable[[], float] = time.monotonic,
        crash: Callable[[str], None] = lambda point: None,
        events: int = 50_000,
        seconds: float = 3600.0,
        keep: int = 3,
    ) -> None:
        self.store, self.wall, self.crash = store, wall, crash
        self.events, self.seconds, self.keep = events, seconds, keep
        self.seq = 0
        self.at = wall()  # wall time of the last checkpoint written or loaded
        self.written = 0
        self.restored: Stored | None = None  # the checkpoint the last rebuild started from

    def restore(self, policies: Callable[[str], Policy]) -> LiveEngine | None:
        """The newest valid checkpoint's engine (then replay the journal after `seq`), or None."""
        with self.store.read(snapshot=True) as tx:
            found = restore(tx, policies)
        self.restored = found[1] if found is not None else None
        self.seq = self.restored.seq if self.restored is not None else 0
        self.at = self.wall()
        return found[0] if found is not None else None

    def due(self, last_seq: int) -> bool:
        new = last_seq - self.seq
        if new <= 0:
            return False
        n, s = self.events, self.seconds
        return (n > 0 and new >= n) or (s > 0 and self.wall() - self.at >= s)

    def after_cycle(self, engine: LiveEngine, last_seq: int) -> None:
        """After a cycle's commits (the engine exactly the journal up to `last_seq`), when one is due:
        a checkpoint, in a transaction of its own (a crash here leaves the previous one). A failure
        is logged, never raised: the journal is the record, a checkpoint only a shortcut."""
        if not self.due(last_seq):
            return
        self.crash("before_checkpoint")
        self.at = t0 = self.wall()  # a failed one is not retried at once
        try:
            state = dump(engine)
            with self.store.write() as tx:
                stored = write(tx, last_seq, engine, self.keep, state=state)
                self.crash("mid_checkpoint")
        except Exception:
            log.exception("checkpoint at journal seq %d failed (the journal is intact)", last_seq)
            return
        self.seq = stored.seq
        self.written += 1
        took = self.wall() - t0
        log.info(
            "checkpoint %d at journal seq %d: %d bytes in %.3fs", stored.id, stored.seq, stored.size, took
        )
