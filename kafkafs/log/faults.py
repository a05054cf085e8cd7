"""Fault injection for crash tests: kill this process at a named step.

``KAFKAFS_KILL_AT=<step>`` in the environment makes :func:`point` send SIGKILL to the
process when it reaches ``<step>`` (``<step>#<n>``: the ``n``-th time it is reached, from
1); ``KAFKAFS_FAIL_AT=<step>`` makes it raise OSError(ENOSPC) there instead. Used by the
tests of the all-or-nothing commit of a bulk write
(:mod:`kafkafs.log.bulk_commit`) and of the transaction coordinator's markers
(``txn.marker``, :mod:`kafkafs.net.transactions`); unset, :func:`point` costs two environment lookups.
"""

from __future__ import annotations

import errno
import os
import signal

ENV = "KAFKAFS_KILL_AT"
FAIL_ENV = "KAFKAFS_FAIL_AT"  # the same, raising OSError(ENOSPC) instead (an error path)
_seen: dict[tuple[str, str], int] = {}


def _reached(env: str, step: str) -> bool:
    want = os.environ.get(env)
    if not want:
        return False
    name, _, nth = want.partition("#")
    if name != step:
        return False
    key = (env, step)
    _seen[key] = _seen.get(key, 0) + 1
    return _seen[key] == int(nth or 1)


def point(step: str) -> None:
    """SIGKILL this process if ``KAFKAFS_KILL_AT`` names ``step``; raise OSError(ENOSPC)
    if ``KAFKAFS_FAIL_AT`` does (see the module)."""
    if _reached(ENV, step):
        os.kill(os.getpid(), signal.SIGKILL)
    if _reached(FAIL_ENV, step):
        raise OSError(errno.ENOSPC, f"injected failure at {step}")
