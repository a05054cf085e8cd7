"""The one place where kafkafs errors become errno values (docs/design.md §1.2, §3.4)."""

from __future__ import annotations

import errno
import functools
import logging

import pyfuse3

from ..core import control as C
from ..log import errors as E
from ..record.errors import CorruptRecordError

log = logging.getLogger(__name__)

report_damage = E.report_damage  # (logged once per place, by whoever meets it first)


_ERRNO = [
    (C.InvalidRequestError, errno.EINVAL),
    (C.NotTakenError, errno.EACCES),
    (C.NoCleanerError, errno.ENOTSUP),
    (C.PassFailedError, errno.EIO),
    (E.OffsetOutOfRangeError, errno.ENOENT),
    (E.UnknownTopicOrPartitionError, errno.ENOENT),
    (E.RecordTooLargeError, errno.EMSGSIZE),
    (E.InvalidTopicError, errno.EINVAL),
    (E.InvalidConfigError, errno.EINVAL),
    (E.InvalidRecordError, errno.EINVAL),
    (E.TopicExistsError, errno.EEXIST),
    (E.ReadOnlyLogError, errno.EROFS),
    (E.LogDirLockedError, errno.EBUSY),
    (CorruptRecordError, errno.EIO),
    (E.LogError, errno.EIO),
]


def errno_of(exc: BaseException) -> int:
    """The errno a shell user should see for ``exc``."""
    if isinstance(exc, pyfuse3.FUSEError):
        return exc.errno
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    for cls, code in _ERRNO:
        if isinstance(exc, cls):
            return code
    return errno.EIO


def fuse_errors(fn):
    """Decorate an async ``pyfuse3.Operations`` handler so that any exception leaves it as a
    ``FUSEError`` with the matching errno (unexpected ones are logged, as EIO). With debug
    logging on (``kafkafs mount --debug``) every request is logged: its handler's name and
    arguments."""
    name = fn.__name__

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request %s%r", name, args[1:])
        try:
            return await fn(*args, **kwargs)
        except pyfuse3.FUSEError:
            raise
        except CorruptRecordError as exc:
            report_damage(exc)
            raise pyfuse3.FUSEError(errno.EIO) from None
        except Exception as exc:
            code = errno_of(exc)
            if code == errno.EIO:
                log.exception("%s failed", fn.__name__)
            else:
                log.debug("%s: %s", fn.__name__, exc)
            raise pyfuse3.FUSEError(code) from None
    return wrapper
