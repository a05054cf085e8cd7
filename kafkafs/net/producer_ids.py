"""InitProducerId (api 22): producer ids for idempotent producers.

As Kafka's ``TransactionCoordinator.handleInitProducerId`` answers a request without a
transactional id: a new producer id every time, epoch 0 (a ``ProducerId``/``ProducerEpoch``
pair given must be both -1 or both set: INVALID_REQUEST otherwise). Ids are handed out in
blocks of 1000 as Kafka's controller hands them to brokers
(``ProducerIdControlManager``): the end of the current block is written to
``kafkafs-producer-ids`` in the first log dir (atomically, before an id of the block is
used), and at start-up the next id is past that and past every producer id the loaded
partitions' producer state knows, so an id is never handed out twice over restarts, nor one
a broker used in these log dirs. A request with a transactional id goes to the
transaction coordinator (:mod:`kafkafs.net.transactions`).
"""

from __future__ import annotations

import logging
import os

import trio

from ..log import checkpoint as ckpt
from ..log.errors import LogError
from . import errors as K

log = logging.getLogger(__name__)

BLOCK = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
FILE = "kafkafs-producer-ids"


class ProducerIds:
    """The id allocator of one node (``path``: its block file)."""

    def __init__(self, broker):
        self.path = os.path.join(broker.config.log_dirs[0], FILE)
        self.lock = trio.Lock()
        start = 0
        try:
            props = ckpt.read_properties(self.path)
            start = int(props.get("next.block.start", 0))
        except (OSError, ValueError, LogError):  # (none yet, or unreadable: the pids below)
            start = 0
        for lg in list(broker.manager.logs.values()):
            for pid in lg.producer_state.producers:
                start = max(start, pid + 1)
        self.next_id = start
        self.block_end = start  # nothing reserved yet

    async def allocate(self) -> int:
        """A producer id never handed out before. Raises OSError when the block file
        cannot be written."""
        async with self.lock:
            if self.next_id >= self.block_end:
                end = self.next_id + BLOCK
                await trio.to_thread.run_sync(ckpt.write_properties, self.path,
                                              {"version": "0", "next.block.start": str(end)})
                self.block_end = end
            pid = self.next_id
            self.next_id += 1
            return pid


def make_state(broker) -> ProducerIds:
    return ProducerIds(broker)


async def init_producer_id(broker, request, conn) -> dict:
    """``TransactionCoordinator.handleInitProducerId``: without a transactional id a new
    producer id, epoch 0; with one, the transaction coordinator's answer."""
    body, v = request.body, request.api_version
    out = {"throttleTimeMs": 0, "errorCode": K.NONE, "producerId": -1, "producerEpoch": -1}
    if v >= 3 and (body["producerId"] == -1) != (body["producerEpoch"] == -1):
        out["errorCode"] = K.INVALID_REQUEST
        return out
    tid = body["transactionalId"]
    if tid == "":
        out["errorCode"] = K.INVALID_REQUEST
        return out
    if tid is not None:
        out["errorCode"], out["producerId"], out["producerEpoch"] = \
            await broker.state["transactions"].init_producer_id(
                tid, body["transactionTimeoutMs"], body.get("producerId", -1),
                body.get("producerEpoch", -1), v)
        return out
    try:
        out["producerId"] = await broker.state["producer_ids"].allocate()
    except OSError as exc:
        log.error("cannot reserve producer ids in %s: %s", broker.state["producer_ids"].path,
                  exc)
        out["errorCode"] = K.COORDINATOR_LOAD_IN_PROGRESS
        return out
    out["producerEpoch"] = 0
    return out


HANDLERS = {22: init_producer_id}
