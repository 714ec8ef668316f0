"""Observations the loop has not journaled yet, once job records are pruned (LiveEngine's retention).

The loop skips an observation whose key it journaled: `seen` holds the keys journaled since the
loop's last instant, and the journal the rest. Two kinds of observation are looked up in the journal
(one query per cycle that has any): a late one (before the loop's last instant: `seen` may have
forgotten it), and the submission of a job the engine does not know, whatever its instant: the job
may be one whose record was dropped after the retention period, reported again by a backend that
still lists it (its key, `submit:<job>`, was journaled when it was submitted or rejected).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..clusters.backend import Observation, Submitted
from ..storage import journal
from ..storage.store import Store
from .live_engine import LiveEngine


def not_journaled(store: Store, e: LiveEngine, obs: Sequence[Observation], since: float) -> list[Observation]:
    """`obs` (none of them in the loop's `seen`) without those whose key is journaled."""
    check = [
        o.key
        for o in obs
        if o.t < since or (isinstance(o, Submitted) and o.job not in e.info and o.job not in e.rejected)
    ]
    if not check:
        return list(obs)
    with store.read() as tx:
        journaled = journal.keys_present(tx, check)
    return [o for o in obs if o.key not in journaled]
