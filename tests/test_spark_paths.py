"""Paths in kafkalog's messages and warnings: as the user wrote them, the partition dir in
the path part (before any query string), and never a credential of the URI (issue 20,
defect 4: ``s3://KEY:SECRET@bucket/...`` was echoed in warnings and KAFKA_DATA_LOSS
messages as ``...&region=us-east-1/compacted-0``)."""

from __future__ import annotations

import json
import logging
import os

import pytest
from pyarrow import fs as pafs

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.spark import fileio
from kafkafs.spark.fileio import display
from kafkafs.spark.options import parse_options
from kafkafs.spark.plan import DataLossError, plan_read

URI = "s3://AKIAEXAMPLE:wJalr/SECRETKEY@bucket/backups/broker-1?region=us-east-1"


def test_display_masks_credentials_and_keeps_the_query_last():
    assert display(URI, "t-0") == "s3://***:***@bucket/backups/broker-1/t-0?region=us-east-1"
    assert display(URI, "t-0", "00000000000000000000.log") == \
        "s3://***:***@bucket/backups/broker-1/t-0/00000000000000000000.log?region=us-east-1"
    assert display(URI) == "s3://***:***@bucket/backups/broker-1?region=us-east-1"
    assert display("s3://KEY:SEC@bucket/a/?region=x&endpoint_override=127.0.0.1:9000",
                   "t-0") == \
        "s3://***:***@bucket/a/t-0?region=x&endpoint_override=127.0.0.1:9000"
    assert display("s3://bucket/a?access_key=AK&secret_key=SK&session_token=T&region=r",
                   "t-1") == \
        "s3://bucket/a/t-1?access_key=***&secret_key=***&session_token=***&region=r"
    assert display("hdfs://nn:8020/kafka", "t-0") == "hdfs://nn:8020/kafka/t-0"
    assert display("s3://bucket/backups@2024", "t-0") == "s3://bucket/backups@2024/t-0"
    assert display("/var/lib/kafka", "t-0") == "/var/lib/kafka/t-0"


@pytest.fixture
def fake_s3(tmp_path, monkeypatch):
    """A log dir read through pyarrow as if it were ``URI`` (a local filesystem behind)."""
    root = tmp_path / "bucket"
    path = root / "t-0"
    os.makedirs(path)
    lg = load_log(str(path), "t", 0, LogConfig(segment_bytes=1024, index_interval_bytes=256))
    for i in range(60):
        lg.append([(1_700_000_000_000, None, b"value-%03d" % i * 4, [])])
    lg.close()
    first = min(n for n in os.listdir(path) if n.endswith(".log"))
    for suffix in (".log", ".index", ".timeindex"):  # retention took the first segment
        os.unlink(path / (first[:-4] + suffix))

    def from_uri(uri):
        assert uri == URI
        return pafs.LocalFileSystem(), str(root)

    monkeypatch.setattr(fileio, "arrow_filesystem", from_uri)
    return URI


def test_data_loss_message_and_warnings_hide_the_secret(fake_s3, caplog):
    opts = {"path": fake_s3, "subscribe": "t,absent",
            "startingOffsets": json.dumps({"t": {"0": 0}}),
            "endingOffsets": json.dumps({"t": {"0": -1}})}
    with pytest.raises(DataLossError) as info:
        plan_read(parse_options(opts))
    text = str(info.value)
    assert "SECRETKEY" not in text and "AKIAEXAMPLE" not in text
    assert "s3://***:***@bucket/backups/broker-1/t-0?region=us-east-1" in text
    with caplog.at_level(logging.WARNING):
        slices = plan_read(parse_options({**opts, "failOnDataLoss": "false"}))
    assert slices
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "absent" in logged and "s3://***:***@bucket/backups/broker-1?region=us-east-1" in logged
    assert "SECRETKEY" not in logged and "AKIAEXAMPLE" not in logged
    assert "region=us-east-1/" not in logged
    assert "SECRETKEY" not in repr(parse_options(opts))
