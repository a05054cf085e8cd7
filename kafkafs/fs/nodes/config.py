"""``<topic>/config``: the topic's effective configuration; writing it replaces the
topic's overrides (docs/tree.md "Topics"; docs/design.md §4.4). The writing rules are
fs.configfile's."""

from __future__ import annotations

import errno
import os

from .. import tree as T
from ..configfile import ConfigTooLargeError, ConfigWriter
from .base import Handle, Kind, err


class ConfigFile(Kind):
    """Read: the text :meth:`text` renders. A descriptor opened for writing (``O_WRONLY``;
    ``O_RDWR`` EACCES) collects the new text in a :class:`ConfigWriter`, which checks each
    line as it is written (EINVAL; EFBIG past its size limit); its ``close`` stores the
    overrides (:meth:`store`). Never cached by the kernel (timeouts 0)."""

    kind = T.CONFIG
    name = b"config"
    parents = (T.TOPIC,)
    perm = 0o644
    ro_perm = 0o444
    entry_timeout = attr_timeout = 0.0
    writable = True

    def text(self, topic: str) -> bytes:
        """The config file of ``topic``: every key of its effective config as
        ``key=value``, sorted, overrides marked by a ``# (override)`` line before them."""
        manager = self.fs.manager
        cfg = manager.topic_config(topic)
        overrides = manager.topic_overrides(topic)
        out = [f"# effective configuration of topic {topic}",
               "# (override) marks keys set for this topic; the others are the broker's.",
               ("# Writing this file replaces the overrides; keys equal to the broker's value"
                " are not stored.")]
        for k, v in sorted(cfg.to_properties().items()):
            if k in overrides:
                out.append("# (override)")
            out.append(f"{k}={v}")
        records = self.metadata_configs(topic)
        if records:
            out.append("# the topic's ConfigRecords in __cluster_metadata (a KRaft broker's "
                       "overrides; shown, not applied):")
            out += [f"# {k}={v}" for k, v in sorted(records.items())]
        return ("\n".join(out) + "\n").encode()

    def metadata_configs(self, topic: str) -> dict[str, str]:
        """The topic's ConfigRecords replayed from ``__cluster_metadata``
        (log.cluster_metadata), replayed again only when that log changed."""
        from ...log.cluster_metadata import load_metadata
        from ...log.errors import LogError
        from ...record.errors import CorruptRecordError
        from ...record.internal import METADATA_TOPIC

        manager = self.fs.manager
        if 0 not in manager.partitions(METADATA_TOPIC):
            return {}
        try:
            mark = manager.get_log(METADATA_TOPIC, 0).log_end_offset
            cached = getattr(self, "_meta", None)
            if cached is None or cached[0] != mark:
                self._meta = cached = (mark, load_metadata(manager))
        except (LogError, CorruptRecordError, OSError):
            return {}
        meta = cached[1]
        t = None if meta is None else meta.topics.get(topic)
        return {} if t is None else dict(t.configs)

    def store(self, topic: str, props: dict[str, str]) -> None:
        """Replace ``topic``'s overrides with the checked ``props`` written to its config
        file; keys whose value equals the broker's are not stored
        (:meth:`LogManager.alter_topic_config`, on the loop: its atomic writes fsync)."""
        manager = self.fs.manager
        defaults = manager.config.log.to_properties()
        overrides = {k: v for k, v in props.items() if defaults.get(k) != v.strip()}
        manager.alter_topic_config(topic, overrides)

    async def getattr(self, node: T.Node):
        return self.attr(node, len(self.text(node.topic)))

    async def truncate(self, node: T.Node, h: Handle | None, size: int) -> bool:
        if self.fs.options.read_only:
            raise err(errno.EROFS)
        return False  # O_TRUNC: accepted, the text written replaces the overrides anyway

    async def open(self, node: T.Node, flags: int, info) -> Handle:
        accmode = flags & os.O_ACCMODE
        writing = accmode in (os.O_WRONLY, os.O_RDWR)
        if writing and self.fs.options.read_only:
            raise err(errno.EROFS)
        if accmode == os.O_RDWR:
            raise err(errno.EACCES)
        h = Handle(node, self)
        if writing:
            h.writer = ConfigWriter(node.topic)
        else:
            h.record = self.text(node.topic)
        info.direct_io = True
        return h

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        return (h.record or b"")[off:off + size]

    async def write(self, h: Handle, off: int, buf: bytes) -> int:
        if h.writer is None:
            raise err(errno.EBADF)
        try:
            return h.writer.write(buf)
        except ConfigTooLargeError:
            raise err(errno.EFBIG) from None

    async def flush(self, h: Handle) -> None:
        if h.writer is None:
            return
        props = h.writer.finish()
        if props is not None:
            self.store(h.node.topic, props)
