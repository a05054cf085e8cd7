"""Fault injection for crash tests: kill this process at a named step.

``KAFKAFS_KILL_AT=<step>`` in the environment makes :func:`point` send SIGKILL to the
process when it reaches ``<step>`` (``<step>#<n>``: the ``n``-th time it is reached, from
1). Used by the tests of the all-or-nothing commit of a bulk write
(:mod:`kafkafs.log.bulk_commit`); unset, :func:`point` is one dict lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "KAFKAFS_KILL_AT"
_seen: dict[str, int] = {}


def point(step: str) -> None:
    """SIGKILL this process if ``KAFKAFS_KILL_AT`` names ``step`` (see the module)."""
    want = os.environ.get(ENV)
    if not want:
        return
    name, _, nth = want.partition("#")
    if name != step:
        return
    _seen[step] = _seen.get(step, 0) + 1
    if _seen[step] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
