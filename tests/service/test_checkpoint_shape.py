"""A checkpoint is a pickle of the live engine, read back only by a service whose
`checkpoint.code_version()` matches; within one release the version moves only with
`checkpoint.FORMAT`. A class the pickle holds that gains, loses or reorders a field (a slotted
dataclass's values are stored by position) must bump FORMAT, or a restart would load an older
checkpoint with its values shifted. This test records the shape of everything a checkpoint holds
per FORMAT and fails when the shape changes without a new FORMAT (Knobs.requeue_first_after was
added once without one)."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from fairshare.service.loop import checkpoint
from fairshare.service.storage.store import Store

from .live_helpers import ManualClock, make_loop, small_scenario

# FORMAT -> the fingerprint of the checkpointed shape (see `_shape`). When this test fails after a
# change to a class the engine holds: bump checkpoint.FORMAT (and say why in its comment), then add
# the fingerprint the failure prints under the new FORMAT.
SHAPES = {6: "fd4d15a59fe591b0", 7: "7f9be88fe1155939"}


def _shape(root: Any) -> list[tuple[str, tuple[str, ...]]]:
    """Every fairshare class reachable from `root` as a pickle stores it, with its stored fields:
    a dataclass's in declaration order (slotted ones pickle by position), another object's
    attribute names sorted (pickled by name)."""
    seen: set[int] = set()
    shapes: dict[str, tuple[str, ...]] = {}
    stack = [root]
    while stack:
        x = stack.pop()
        if (
            id(x) in seen
            or x is None
            or isinstance(x, str | int | float | bool | bytes | np.ndarray | np.generic)
        ):
            continue
        seen.add(id(x))
        if isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
            continue
        if isinstance(x, list | tuple | deque | set | frozenset):
            stack.extend(x)
            continue
        cls = type(x)
        if not cls.__module__.startswith("fairshare") or isinstance(x, type):
            continue
        if dataclasses.is_dataclass(x):
            names = tuple(f.name for f in dataclasses.fields(x))
            values = [getattr(x, n, None) for n in names]
        elif "__getstate__" in vars(cls):  # a class that chooses what it pickles
            state = x.__getstate__()
            names = tuple(sorted(state))
            values = list(state.values())
        elif hasattr(x, "__dict__"):
            names = tuple(sorted(vars(x)))
            values = list(vars(x).values())
        else:
            slots = tuple(getattr(cls, "__slots__", ()))
            names, values = slots, [getattr(x, n, None) for n in slots]
        shapes[f"{cls.__module__}.{cls.__qualname__}"] = names
        stack.extend(v for v in values if not callable(v) or hasattr(v, "__dict__"))
    return sorted(shapes.items())


def test_the_checkpointed_shape_changes_only_with_a_new_checkpoint_format(tmp_path: Path) -> None:
    clock = ManualClock()
    with Store.open(f"sqlite:///{tmp_path}/x.db", clock) as store:
        loop = make_loop(store, small_scenario(), clock)
        end = clock.t + 12 * 3600
        while clock.t < end:
            clock.t += 300.0
            loop.cycle()
        engine = loop.engine
        assert engine is not None
        pickle.loads(pickle.dumps(engine))  # what the fingerprint describes is what a checkpoint holds
        shape = _shape(engine)
        loop._reset()
    names = dict(shape)
    assert "fairshare.core.model.Knobs" in names and "fairshare.core.snapshot.JobState" in names
    fingerprint = hashlib.sha256(repr(shape).encode()).hexdigest()[:16]
    assert SHAPES.get(checkpoint.FORMAT) == fingerprint, (
        f"the checkpointed engine's shape is {fingerprint} under FORMAT {checkpoint.FORMAT} "
        f"(recorded: {SHAPES}); if a class it holds changed, bump checkpoint.FORMAT and record it. "
        f"Shape: {shape}"
    )
