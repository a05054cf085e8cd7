"""The node kinds of the mounted tree, one module each, and their registry (docs/design.md
§8.1).

:data:`KINDS` lists every kind class, one line each; its order is the order ``readdir``
lists a directory's fixed children in. A kind's class says where its nodes sit (``name``
under the kinds in ``parents``) and answers the requests for them (fs.nodes.base).
:func:`handlers` makes one handler per kind for a mount; ``KafkaFS`` dispatches every
request to ``handlers[node.kind]``.
"""

from __future__ import annotations

from .append import AppendFile
from .base import Kind
from .bytime import ByTimeDir, ByTimeLink
from .config import ConfigFile
from .groups import (
    GroupDir,
    GroupLagFile,
    GroupOffsetFile,
    GroupsDir,
    GroupStateFile,
    GroupTopicDir,
)
from .keys import KeyFile, KeysDir, NewKeyFile
from .offsets import OffsetDir, OffsetFile
from .partition import PartitionDir
from .rendered import JsonlFile, MessagesFile
from .root import RootDir
from .segments import SegmentFile, SegmentsDir
from .topic import TopicDir
from .transactions import TransactionFile, TransactionsDir

KINDS: tuple[type[Kind], ...] = (
    RootDir,
    TopicDir,
    ConfigFile,
    PartitionDir,
    AppendFile,
    OffsetDir,
    OffsetFile,
    ByTimeDir,
    ByTimeLink,
    MessagesFile,
    JsonlFile,
    SegmentsDir,
    SegmentFile,
    KeysDir,
    KeyFile,
    NewKeyFile,
    GroupsDir,
    GroupDir,
    GroupTopicDir,
    GroupOffsetFile,
    GroupStateFile,
    GroupLagFile,
    TransactionsDir,
    TransactionFile,
)

# kinds with one node per name, dropped when the kernel forgets it (fs.tree InodeTable)
DYNAMIC = frozenset(cls.kind for cls in KINDS if cls.dynamic)


def handlers(fs) -> dict[str, Kind]:
    """Kind name -> its handler for the mount ``fs`` (a ``KafkaFS``: its ``options`` and,
    for the rendered views, ``views`` must be set). Each directory's handler gets its fixed
    children (name -> child kind's handler) from the kinds naming it in ``parents``, in the
    order of :data:`KINDS`. Raises ValueError for two kinds of one name, or two children of
    one name under one parent."""
    out: dict[str, Kind] = {}
    for cls in KINDS:
        if cls.kind in out:
            raise ValueError(f"two node kinds named {cls.kind!r}")
        out[cls.kind] = cls(fs)
    for cls in KINDS:
        for parent in cls.parents:
            children = out[parent].children
            if cls.name in children:
                raise ValueError(f"two children named {cls.name!r} under {parent!r}")
            children[cls.name] = out[cls.kind]
    return out
