"""``records.jsonl`` of Kafka's internal topics: keys and values decoded (docs/tree.md
"Internal topics"; docs/design.md §2.5).

In ``__consumer_offsets``, ``__transaction_state``, ``__share_group_state`` and
``__cluster_metadata`` a record's key and value are Kafka's structured records, which the
schema tables decode (:func:`kafkafs.record.internal.record_json`). Their lines in
``records.jsonl`` carry them as JSON objects -- the ones ``kafka-dump-log``'s decoders
print: ``"key": {"type":"1","data":{"group":...}}``, ``"value": {"version":"3","data":
{"offset":42,...}}`` (``null`` for a tombstone); a metadata record ``"key": null``,
``"value": {"type":"TOPIC_RECORD","version":0,"data":{...}}`` -- instead of text or
``{"base64": ...}``. Everything else is as in every other topic's ``records.jsonl``
(:mod:`kafkafs.record.jsonl`): ``offset``, ``timestamp``, ``timestamp_type``, ``headers``;
control records flagged with ``control``. A record the tables cannot decode (a type they
do not know, bytes that do not parse) keeps its key and value as any topic shows them and
adds ``"decode_error": "<why>"``.

The lines are rendered in Python, a batch at a time (no native run: these topics are
small beside data topics).
"""

from __future__ import annotations

import json

from ..record.batch import TIMESTAMP_TYPE_NAMES, RecordBatch
from ..record.internal import TOPIC_FAMILIES, record_json
from ..record.jsonl import text_or_base64
from .views import render_jsonl

__all__ = ["decoded_renderers", "family_of"]


def family_of(topic: str) -> str | None:
    """The table family whose records ``topic`` holds, or None for a data topic."""
    return TOPIC_FAMILIES.get(topic)


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def decoded_renderers(family: str):
    """``(render, measure)`` of the ``records.jsonl`` view of a topic of ``family``, in
    the form :class:`~kafkafs.fs.views.LineView` takes them: ``render(batch, start=None)
    -> bytes`` (the lines of the records at or past ``start``), ``measure(batch) -> int``.
    Raises CorruptRecordError as :func:`~kafkafs.fs.views.render_jsonl` does."""

    def render(batch: RecordBatch, start: int | None = None) -> bytes:
        if batch.is_control:
            return render_jsonl(batch, start)
        ts_type = _dumps(TIMESTAMP_TYPE_NAMES[batch.timestamp_type])
        lines = []
        for r in batch.records():
            if start is not None and r.offset < start:
                continue
            key, value, error = record_json(family, r.key, r.value)
            if error is not None:
                key, value = _dumps(text_or_base64(r.key)), _dumps(text_or_base64(r.value))
            elif key is None:
                key = "null"
            headers = _dumps([{"key": k, "value": text_or_base64(v)} for k, v in r.headers])
            line = (f'{{"offset":{r.offset},"timestamp":{r.timestamp},"timestamp_type":'
                    f'{ts_type},"key":{key},"value":{value},"headers":{headers}')
            if error is not None:
                line += f',"decode_error":{_dumps(error)}'
            lines.append(line + "}\n")
        return "".join(lines).encode("utf-8")

    def measure(batch: RecordBatch) -> int:
        return len(render(batch))

    return render, measure
