"""Transactional producers as files: ``MOUNT/__transaction_state/transactions/<id>``
(docs/tree.md "Transactions"; docs/design.md §3.5).

``transactions/`` lists the transactional ids the transaction coordinator knows (replayed
from ``__transaction_state``: log.txn_state; Dead ones left out), each name escaped as a
key's (fs.keys.key_name); a file holds the id's state as JSON: producer id and epoch,
state, partitions, timeout, last update and start (ms). Read-only; never cached by the
kernel (the next record changes it).
"""

from __future__ import annotations

import errno
import json

import trio

from ...log.txn_state import TRANSACTION_STATE
from .. import tree as T
from ..keys import Hashed, key_name, parse_name
from .base import Directory, Handle, Kind, err

__all__ = ["TransactionFile", "TransactionsDir"]


def _state_json(t) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, p in t.partitions:
        by_topic.setdefault(topic, []).append(p)
    doc = {"transactional_id": t.transactional_id, "producer_id": t.producer_id,
           "producer_epoch": t.producer_epoch, "state": t.state,
           "partitions": [{"topic": k, "partitions": sorted(v)}
                          for k, v in sorted(by_topic.items())],
           "transaction_timeout_ms": t.timeout_ms, "last_update_ms": t.last_update_ms,
           "start_ms": t.start_ms, "coordinator_partition": t.partition}
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


class _TxnKind(Kind):
    entry_timeout = attr_timeout = 0.0

    async def transactions(self) -> dict:
        return await trio.to_thread.run_sync(self.fs.core.transactions.transactions)


class TransactionsDir(Directory, _TxnKind):
    """``transactions/`` (in ``__transaction_state`` only)."""

    kind = T.TXNS
    name = b"transactions"
    parents = (T.TOPIC,)

    def present(self, parent: T.Node) -> bool:
        return parent.topic == TRANSACTION_STATE

    async def lookup_name(self, parent: T.Node, name: bytes) -> T.Node:
        parsed = parse_name(name)
        if isinstance(parsed, Hashed):
            raise err(errno.ENOENT)
        txn_id = parsed.decode("utf-8", "replace")
        if txn_id not in await self.transactions():
            raise err(errno.ENOENT)
        return self.fs.inodes.get(T.TXN, parent.topic, None, txn_id)

    async def readdir(self, h: Handle, start_id: int, token) -> None:
        ids = sorted(await self.transactions())
        await self.reply_names(h, token, start_id, [
            (key_name(i.encode("utf-8")), self.fs.inodes.get(T.TXN, h.node.topic, None, i))
            for i in ids])


class TransactionFile(_TxnKind):
    """``transactions/<id>``: the id's state as JSON."""

    kind = T.TXN
    dynamic = True

    async def text(self, node: T.Node) -> bytes:
        t = (await self.transactions()).get(node.name)
        if t is None:
            raise err(errno.ENOENT)
        return _state_json(t)

    async def getattr(self, node: T.Node):
        return self.attr(node, len(await self.text(node)))

    async def open(self, node: T.Node, flags: int, info) -> Handle:
        self.refuse_writing(flags)
        h = Handle(node, self)
        h.record = await self.text(node)
        info.direct_io = True
        return h

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        return h.record[off:off + size]
