"""``log/leader_append.py``: the batch-wide fast path (the C column builder and numpy) and
the record-by-record path reach the same verdict and write the same bytes, over random
batches (keys missing or not, timestamps in and out of bounds and -1, every codec,
CreateTime and LogAppendTime topics, compacted or not)."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkafs.log import leader_append
from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager
from kafkafs.record import encode_batch

NOW = int(time.time() * 1000)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("leader")
    out = {}
    for name in ("fast", "slow"):
        m = LogManager(BrokerConfig.from_properties({}).with_log_dirs([str(d / name)]))
        m.startup()
        out[name] = m
    yield out
    for m in out.values():
        m.shutdown()


def _make(m, topic, overrides):
    if not m.partitions(topic):
        m.create_topic(topic, 1, overrides)
    return m.get_log(topic, 0)


def _verdict(lg, data, slow, monkeypatch):
    with monkeypatch.context() as mp:
        if slow:
            mp.setattr(leader_append, "_summary", lambda b: None)
        try:
            r = leader_append.append_as_leader(lg, data, now=NOW, leader_epoch=3)
        except Exception as exc:  # the verdict compared is the error's type and records
            return type(exc).__name__, getattr(exc, "record_errors", None)
    seg = lg.segments()[-1]
    with seg.reader() as fd:
        data = os.pread(fd, seg.size, 0)
    return "ok", (r.base_offset, r.log_append_time, data)


def records_of(most: int):
    """1..``most`` records as ``(timestamp or -1, key or None)``, timestamps within the
    default bounds and out of them."""
    return st.lists(st.tuples(
        st.one_of(st.just(-1), st.integers(NOW - 10 * 3_600_000, NOW + 2 * 3_600_000)),
        st.one_of(st.none(), st.binary(max_size=8))), min_size=1, max_size=most)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=records_of(20),
    codec=st.sampled_from([0, 1, 2, 3, 4]),
    compact=st.booleans(), log_append=st.booleans(), bounded=st.booleans())
def test_fast_and_slow_paths_agree(logs, monkeypatch, records, codec, compact, log_append,
                                   bounded):
    overrides = {"cleanup.policy": "compact" if compact else "delete",
                 "message.timestamp.type": "LogAppendTime" if log_append else "CreateTime"}
    if bounded:
        overrides["message.timestamp.before.max.ms"] = str(3_600_000)
    topic = "t-" + "-".join(f"{k}{v}".replace(".", "").replace("=", "") for k, v in
                            sorted(overrides.items()))[:200]
    topic = topic.replace("cleanuppolicy", "c").replace("messagetimestamp", "m")
    data = bytes(encode_batch([(ts, key, b"v", ()) for ts, key in records], compression=codec))
    fast = _verdict(_make(logs["fast"], topic, overrides), data, False, monkeypatch)
    slow = _verdict(_make(logs["slow"], topic, overrides), data, True, monkeypatch)
    assert fast == slow


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=records_of(leader_append.SMALL_BATCH),
    codec=st.sampled_from([0, 1, 3]), log_append=st.booleans())
def test_small_batches_summed_up_as_the_column_builder_does(monkeypatch, records, codec,
                                                             log_append):
    """A batch of up to SMALL_BATCH records is summed up from its decoded tuples; the
    column builder's summary of it is the same."""
    from kafkafs.record.batch import LOG_APPEND_TIME, RecordBatch

    b = RecordBatch.from_buffer(bytearray(encode_batch(
        [(ts, key, b"v", ()) for ts, key in records], compression=codec,
        timestamp_type=LOG_APPEND_TIME if log_append else 0,
        log_append_time=NOW if log_append else None)))
    small = leader_append._summary(b)
    with monkeypatch.context() as mp:
        mp.setattr(leader_append, "SMALL_BATCH", 0)
        assert leader_append._summary(b) == small
    assert small is not None
