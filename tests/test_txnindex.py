"""Transaction index (``.txnindex``): Kafka's ``TransactionIndex`` / ``AbortedTxn``."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkafs.log.errors import CorruptIndexError, ReadOnlyLogError
from kafkafs.log.txnindex import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
    decode_entries,
)

NAME = "00000000000000000000.txnindex"
I64 = st.integers(-(1 << 63), (1 << 63) - 1)


def entry_bytes(pid, first, last, lso, version=0) -> bytes:
    """One entry laid out by hand from Kafka's AbortedTxn (i16 + 4 x i64, big-endian)."""
    return (version.to_bytes(2, "big", signed=True) + pid.to_bytes(8, "big", signed=True)
            + first.to_bytes(8, "big", signed=True) + last.to_bytes(8, "big", signed=True)
            + lso.to_bytes(8, "big", signed=True))


def _read(p) -> bytes:
    with open(p, "rb") as f:
        return f.read()


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / NAME)


def test_entry_layout_is_34_bytes_by_hand():
    txn = AbortedTxn(producer_id=7, first_offset=10, last_offset=25, last_stable_offset=11)
    assert ENTRY_SIZE == 34
    assert txn.to_bytes() == entry_bytes(7, 10, 25, 11)
    assert txn.to_bytes() == bytes.fromhex("0000" "0000000000000007" "000000000000000a"
                                           "0000000000000019" "000000000000000b")
    assert AbortedTxn.from_bytes(txn.to_bytes()) == txn
    assert str(txn) == ("AbortedTxn(version=0, producerId=7, firstOffset=10, lastOffset=25, "
                        "lastStableOffset=11)")


def test_missing_file_is_an_empty_index_and_is_not_created(path):
    idx = TransactionIndex(path, 0)
    assert idx.all_aborted_txns() == []
    assert idx.collect_aborted(0, 100) == TxnIndexSearchResult([], False)
    idx.sanity_check()
    idx.reset()
    idx.truncate_to(0)
    idx.flush()
    idx.close()
    assert not os.path.exists(path)
    ro = TransactionIndex(path, 0, writable=False)
    assert ro.all_aborted_txns() == [] and not os.path.exists(path)


def test_append_read_round_trip_and_file_bytes(path):
    txns = [AbortedTxn(1, 0, 5, 0), AbortedTxn(2, 3, 9, 3), AbortedTxn(1, 12, 20, 12)]
    with TransactionIndex(path, 0) as idx:
        for t in txns:
            idx.append(t)
        idx.flush()
        assert idx.last_offset == 20
        assert idx.all_aborted_txns() == txns
    with open(path, "rb") as f:
        assert f.read() == b"".join(entry_bytes(*t[:4]) for t in txns)
    assert TransactionIndex(path, 0, writable=False).all_aborted_txns() == txns


def test_append_requires_increasing_last_offset_including_existing_entries(path):
    idx = TransactionIndex(path, 0)
    idx.append(AbortedTxn(1, 0, 5, 0))
    with pytest.raises(ValueError, match="must increase sequentially, but 5 is not greater"):
        idx.append(AbortedTxn(2, 1, 5, 0))
    idx.close()
    reopened = TransactionIndex(path, 0)  # the entry already on disk counts
    assert reopened.last_offset == 5
    with pytest.raises(ValueError, match="4 is not greater than current last offset 5"):
        reopened.append(AbortedTxn(2, 1, 4, 0))
    reopened.append(AbortedTxn(2, 1, 6, 0))
    assert [t.last_offset for t in reopened.all_aborted_txns()] == [5, 6]


def test_truncate_to(path):
    idx = TransactionIndex(path, 0)
    txns = [AbortedTxn(1, 0, 5, 0), AbortedTxn(2, 3, 9, 3), AbortedTxn(3, 10, 20, 10)]
    for t in txns:
        idx.append(t)
    idx.truncate_to(25)  # nothing reaches 25: unchanged
    assert idx.all_aborted_txns() == txns
    idx.truncate_to(9)  # drops the entry whose last offset is 9 and all after it
    assert idx.all_aborted_txns() == txns[:1]
    assert os.path.getsize(path) == ENTRY_SIZE
    assert idx.last_offset == 5
    idx.append(AbortedTxn(4, 6, 7, 6))  # 7 > 5 is fine again
    idx.truncate_to(0)
    assert idx.all_aborted_txns() == [] and idx.last_offset is None
    assert os.path.getsize(path) == 0


def test_reset_keeps_an_empty_file(path):
    idx = TransactionIndex(path, 0)
    idx.append(AbortedTxn(1, 0, 5, 0))
    idx.reset()
    assert os.path.getsize(path) == 0 and idx.last_offset is None
    idx.append(AbortedTxn(1, 0, 1, 0))
    assert idx.all_aborted_txns() == [AbortedTxn(1, 0, 1, 0)]


def test_collect_aborted_like_kafka(path):
    idx = TransactionIndex(path, 0)
    # (pid, first, last, lso)
    for t in [(0, 0, 10, 5), (1, 5, 12, 11), (2, 15, 20, 21), (3, 18, 30, 25)]:
        idx.append(AbortedTxn(*t))
    a, b, c, d = idx.all_aborted_txns()
    # overlap: last >= fetch and first < upper; stop once an LSO reaches the upper bound
    assert idx.collect_aborted(0, 5) == ([a], True)
    assert idx.collect_aborted(0, 11) == ([a, b], True)
    assert idx.collect_aborted(11, 16) == ([b, c], True)
    assert idx.collect_aborted(13, 30) == ([c, d], False)
    assert idx.collect_aborted(31, 40) == ([], False)


def test_sanity_check(path):
    idx = TransactionIndex(path, 100)
    idx.append(AbortedTxn(1, 90, 100, 95))
    idx.sanity_check()
    idx.append(AbortedTxn(1, 90, 101, 95))
    idx.sanity_check()
    low = TransactionIndex(path, 102)
    with pytest.raises(CorruptIndexError, match="is less than start offset 102"):
        low.sanity_check()


def test_torn_tail_is_named_with_file_and_position(path):
    with open(path, "wb") as f:
        f.write(entry_bytes(1, 0, 5, 0) + entry_bytes(2, 1, 6, 1)[:20])
    ro = TransactionIndex(path, 0, writable=False)
    with pytest.raises(CorruptIndexError) as exc:
        ro.all_aborted_txns()
    assert path in str(exc.value) and "position 34" in str(exc.value)
    assert "20 bytes" in str(exc.value)
    with pytest.raises(CorruptIndexError):
        ro.sanity_check()
    with pytest.raises(CorruptIndexError):
        ro.collect_aborted(0, 10)
    # Kafka's own reading: whole entries only
    assert ro.all_aborted_txns(allow_torn_tail=True) == [AbortedTxn(1, 0, 5, 0)]
    rw = TransactionIndex(path, 0)
    assert rw.last_offset == 5
    with pytest.raises(CorruptIndexError, match="not appending after it"):
        rw.append(AbortedTxn(3, 7, 8, 7))
    assert os.path.getsize(path) == 54
    rw.truncate_to(5)  # truncation drops the torn tail with the entries
    assert os.path.getsize(path) == 0


def test_unknown_version_is_refused_as_kafka_reads_it(path):
    # Kafka reads the version as the entry's first byte: 0x01 0x00 is version 1 -> refused,
    # 0x00 0x01 reads as version 0 -> accepted
    bad = b"\x01\x00" + entry_bytes(1, 0, 5, 0)[2:]
    odd = b"\x00\x01" + entry_bytes(1, 0, 5, 0)[2:]
    with pytest.raises(CorruptIndexError, match="Unexpected aborted transaction version 1 .* "
                                                 "position 34"):
        decode_entries(odd + bad, path)
    assert decode_entries(odd) == [AbortedTxn(1, 0, 5, 0)]


def test_read_only_never_writes(path):
    with open(path, "wb") as f:
        f.write(entry_bytes(1, 0, 5, 0))
    before = os.stat(path)
    ro = TransactionIndex(path, 0, writable=False)
    for call in (lambda: ro.append(AbortedTxn(1, 6, 7, 6)), lambda: ro.truncate_to(0),
                 ro.reset, ro.delete_if_exists, lambda: ro.rename_to(path + ".deleted")):
        with pytest.raises(ReadOnlyLogError):
            call()
    ro.flush()
    ro.close()
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert os.listdir(os.path.dirname(path)) == [NAME]


def test_rename_and_delete(path):
    idx = TransactionIndex(path, 0)
    idx.append(AbortedTxn(1, 0, 5, 0))
    idx.rename_to(path + ".deleted")
    assert not os.path.exists(path) and idx.path == path + ".deleted"
    idx.append(AbortedTxn(1, 6, 7, 6))  # the open file followed the rename
    assert len(idx.all_aborted_txns()) == 2
    assert idx.delete_if_exists() is True
    assert idx.delete_if_exists() is False
    missing = TransactionIndex(path, 0)
    missing.rename_to(path + ".swap")  # no file yet: only the name changes
    assert missing.path == path + ".swap" and not os.path.exists(path + ".swap")


def test_write_after_close_reopens(path):
    idx = TransactionIndex(path, 0)
    idx.append(AbortedTxn(1, 0, 5, 0))
    idx.close()
    idx.append(AbortedTxn(1, 6, 7, 6))
    assert len(idx.all_aborted_txns()) == 2


entries = st.lists(st.tuples(I64, I64, st.integers(0, 1 << 40), I64), max_size=20)


@settings(max_examples=60, deadline=None)
@given(entries)
def test_property_round_trip_and_independent_decode(tmp_path_factory, raw):
    d = tmp_path_factory.mktemp("txn")
    p = str(d / NAME)
    # make last offsets strictly increasing as the index requires
    txns, last = [], -1
    for pid, first, bump, lso in raw:
        last += 1 + bump
        txns.append(AbortedTxn(pid, first, last, lso))
    idx = TransactionIndex(p, 0)
    for t in txns:
        idx.append(t)
    data = _read(p) if txns else b""
    assert len(data) == ENTRY_SIZE * len(txns)
    # independent decode with struct
    decoded = [AbortedTxn(*struct.unpack_from(">hqqqq", data, i * 34)[1:])
               for i in range(len(txns))]
    assert decoded == txns == idx.all_aborted_txns()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 10), st.integers(0, 20)),
                max_size=12),
       st.integers(0, 80), st.integers(0, 80))
def test_property_collect_matches_a_plain_filter(tmp_path_factory, raw, fetch, span):
    d = tmp_path_factory.mktemp("txn")
    idx = TransactionIndex(str(d / NAME), 0)
    txns, last = [], -1
    for first_gap, length, lso_gap in raw:
        last += 1 + length
        txns.append(AbortedTxn(1, max(0, last - first_gap), last, last + lso_gap))
    for t in txns:
        idx.append(t)
    upper = fetch + span
    found, complete = idx.collect_aborted(fetch, upper)
    expected = []
    for t in txns:
        if t.last_offset >= fetch and t.first_offset < upper:
            expected.append(t)
        if t.last_stable_offset >= upper:
            break
    assert found == expected
    assert complete == any(t.last_stable_offset >= upper for t in txns)
