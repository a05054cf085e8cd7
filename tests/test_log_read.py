"""``Log.read``: one read of a partition as Kafka's fetch path answers it (``UnifiedLog.read``,
``LogSegment.read``, ``FetchDataInfo``): a byte range of one segment from the batch holding
the start offset, bounded by ``max_bytes`` (``minOneMessage``) and by the isolation's
maximum offset, with the aborted transactions a read_committed consumer needs. Checked
against the segment files' own bytes, against ``Log.batches`` (successive reads meet every
batch once) and against the plain model of transactions of test_transactions_log."""

from __future__ import annotations

import os
import random

import pytest
from test_transactions_log import Model, make_log, marker, txn_batch, write_workload

from kafkafs.log.errors import OffsetOutOfRangeError
from kafkafs.log.isolation import AbortedFilter
from kafkafs.log.read import FETCH_HIGH_WATERMARK, FETCH_LOG_END, FETCH_TXN_COMMITTED
from kafkafs.record.control import ABORT


def _plain_log(tmp_path, n=300, **cfg):
    lg = make_log(tmp_path, **cfg)
    rnd = random.Random(7)
    for i in range(n):
        k = rnd.randint(1, 4)
        lg.append([(1_000 + i, b"k%d" % i, b"v%d-%d" % (i, j) * rnd.randint(1, 5), ())
                   for j in range(k)])
    return lg


def test_a_read_is_a_byte_range_of_one_segment_from_the_batch_holding_the_offset(tmp_path):
    lg = _plain_log(tmp_path)
    assert len(lg.segments()) > 5
    for offset in range(lg.log_start_offset, lg.log_end_offset):
        info = lg.read(offset, 1 << 20)
        seg = info.segment
        assert seg.base_offset == info.base_offset <= offset
        with open(seg.log_path, "rb") as f:
            raw = f.read()
        # the bytes are the file's, from a batch start to at most the segment's end
        assert 0 < info.size <= len(raw) - info.position
        assert info.read_bytes() == raw[info.position:info.position + info.size]
        batches = list(info.batches())
        assert batches[0].base_offset <= offset <= batches[0].last_offset
        assert batches[-1].position + batches[-1].size == info.position + info.size
        assert not info.first_entry_incomplete and info.aborted is None
        assert (info.log_start_offset, info.log_end_offset) == (0, lg.log_end_offset)
        assert info.high_watermark == info.last_stable_offset == lg.log_end_offset
    lg.close()


@pytest.mark.parametrize("min_one", [True, False])
def test_successive_reads_meet_every_batch_once(tmp_path, min_one):
    lg = _plain_log(tmp_path)
    expected = [(b.base_offset, b.crc) for b in lg.batches()]
    biggest = max(b.size for b in lg.batches())
    rnd = random.Random(3)
    got, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        max_bytes = rnd.randint(1, 3 * biggest) if min_one else rnd.randint(biggest, 3 * biggest)
        info = lg.read(offset, max_bytes, min_one_message=min_one)
        assert info.size <= max(max_bytes, biggest)
        batches = list(info.batches())
        assert batches, (offset, info)  # a read in range always makes progress
        got.extend((b.base_offset, b.crc) for b in batches)
        offset = batches[-1].next_offset
    assert got == expected
    lg.close()


def test_max_bytes_cuts_the_range_and_min_one_message_takes_the_first_batch_whole(tmp_path):
    lg = make_log(tmp_path, segment_bytes=1 << 20)
    lg.append([(1, None, b"x" * 500, ())])
    first = next(lg.batches())
    lg.append([(2, None, b"y" * 10, ())])
    size = first.size

    whole = lg.read(0, size - 1)  # minOneMessage: the first batch however large
    assert whole.size == size and not whole.first_entry_incomplete
    assert [b.base_offset for b in whole.batches()] == [0]

    cut = lg.read(0, size - 1, min_one_message=False)
    assert cut.size == size - 1 and cut.first_entry_incomplete
    assert list(cut.batches()) == []  # an incomplete batch at the end of a range: no batch

    assert lg.read(0, 0, min_one_message=False).empty
    both = lg.read(0, 1 << 20)
    assert [b.base_offset for b in both.batches()] == [0, 1]
    assert lg.read(1, 1 << 20).position == size
    lg.close()


def test_offsets_outside_the_log_and_at_its_end(tmp_path):
    lg = _plain_log(tmp_path, n=40)
    end = lg.log_end_offset
    at_end = lg.read(end, 1000)
    assert at_end.empty and at_end.segment is None and at_end.fetch_offset == end
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(end + 1, 1000)
    lg.log_start_offset = 10  # (as DeleteRecords leaves it)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(9, 1000)
    assert next(lg.read(10, 1000).batches()).last_offset >= 10
    with pytest.raises(ValueError):
        lg.read(10, -1)
    with pytest.raises(ValueError):
        lg.read(10, 100, isolation="read_committed")
    lg.close()


def test_a_read_after_a_gap_of_a_compacted_segment_goes_on_to_the_next(tmp_path):
    """A segment holding nothing from the start offset on (its records past it compacted
    away): the read goes on in the next segment, as ``LocalLog.read`` does."""
    lg = make_log(tmp_path, segment_bytes=1 << 20)
    lg.append([(1, None, b"a", ())])  # offset 0
    lg.roll()
    lg.close()
    part = tmp_path / "t-0"
    # the next segment starts at 5 and holds offsets 5-6: offsets 1-4 were in batches the
    # cleaner removed
    from kafkafs.record.batch import encode_batch, set_base_offset

    raw = bytearray(encode_batch([(1, None, b"b", ()), (2, None, b"c", ())]))
    set_base_offset(raw, 5)
    for name in os.listdir(part):
        if name.startswith("00000000000000000001"):
            os.unlink(part / name)
    (part / "00000000000000000005.log").write_bytes(bytes(raw))
    lg = make_log(tmp_path, segment_bytes=1 << 20)
    assert lg.log_end_offset == 7
    info = lg.read(1, 1000)  # floor segment 0 holds nothing at or past 1
    assert info.base_offset == 5 and [b.base_offset for b in info.batches()] == [5]
    lg.close()


def test_read_committed_stops_at_the_last_stable_offset_and_lists_aborted_ones(tmp_path):
    lg = make_log(tmp_path)
    model = Model()
    write_workload(lg, model, seed=5, steps=150)
    assert model.ongoing  # the workload leaves transactions open: the LSO is below the end
    assert lg.last_stable_offset == model.lso < lg.log_end_offset

    rnd = random.Random(11)
    values, offset = [], lg.log_start_offset
    while True:
        info = lg.read(offset, rnd.randint(1, 2000), isolation=FETCH_TXN_COMMITTED)
        assert info.last_stable_offset == model.lso and info.aborted is not None
        if info.empty:
            break
        batches = list(info.batches())
        assert all(b.base_offset < model.lso for b in batches)  # nothing past the LSO
        skip = AbortedFilter(info.aborted)  # a consumer uses each fetch's own list
        for b in batches:
            if b.is_control or skip.is_aborted(b):
                continue
            values.extend(r.value for r in b.records() if r.offset >= offset)
        offset = batches[-1].next_offset
    assert offset == model.lso
    assert values == model.committed_values()

    # read_uncommitted goes on past the LSO, the open transactions included
    lso = model.lso
    tail = lg.read(lso, 1 << 20, isolation=FETCH_LOG_END)
    assert next(tail.batches()).base_offset == lso and tail.aborted is None
    assert not lg.read(lso, 1 << 20, isolation=FETCH_HIGH_WATERMARK).empty
    assert lg.read(lso, 1 << 20, isolation=FETCH_TXN_COMMITTED).empty

    for pid in list(model.ongoing):  # abort them all: the LSO reaches the end
        at, _ = lg.append_encoded(marker(ABORT, pid))
        model.end(ABORT, pid, at)
    assert lg.last_stable_offset == lg.log_end_offset
    done = lg.read(lso, 1 << 20, isolation=FETCH_TXN_COMMITTED)
    assert not done.empty
    assert any(a.first_offset == lso for a in done.aborted)
    lg.close()


def test_the_aborted_list_reaches_past_the_range_to_the_markers(tmp_path):
    """A transaction whose data is in the range and whose ABORT marker is in a later segment
    is listed: a consumer drops its batches although the marker comes in a later fetch."""
    lg = make_log(tmp_path, segment_bytes=400)
    a, _ = lg.append_encoded(txn_batch(7, 2))
    for i in range(12):  # other data rolls the segments on before the abort
        lg.append([(5_000 + i, None, b"plain-%d" % i * 5, ())])
    assert len(lg.segments()) > 2
    end, _ = lg.append_encoded(marker(ABORT, 7))
    info = lg.read(a, 1, isolation=FETCH_TXN_COMMITTED)
    assert [b.base_offset for b in info.batches()] == [a]
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in info.aborted] == \
        [(7, a, end)]
    lg.close()


def test_offsets_that_go_back_inside_a_range_are_damage(tmp_path):
    """The walk of a range holds the log layer's ordering rule: a batch whose offsets go
    back is an error naming the file and position, after the batches before it."""
    from kafkafs.record.batch import encode_batch, set_base_offset
    from kafkafs.record.errors import CorruptRecordError

    part = tmp_path / "t-0"
    part.mkdir()
    def batch(base):
        raw = bytearray(encode_batch([(1, None, b"r%d" % i, ()) for i in range(2)]))
        set_base_offset(raw, base)
        return bytes(raw)

    raws = [batch(0), batch(4), batch(2)]  # in a sealed segment, the third goes back
    (part / "00000000000000000000.log").write_bytes(b"".join(raws))
    (part / "00000000000000000010.log").write_bytes(batch(10))
    from kafkafs.log.config import LogConfig
    from kafkafs.log.loader import load_log

    lg = load_log(str(part), "t", 0, LogConfig(), writable=False, had_clean_shutdown=True)
    info = lg.read(0, 1 << 20)
    seen = []
    with pytest.raises(CorruptRecordError) as exc:
        for b in info.batches():
            seen.append(b.base_offset)
    assert seen == [0, 4] and exc.value.position == len(raws[0]) + len(raws[1])
    assert "offsets go back" in str(exc.value)
    lg.close()
