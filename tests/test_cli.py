"""The command line on a log dir without a daemon: kafka-topics, console producer and
consumer, get-offsets, with Kafka's option names and output lines."""

from __future__ import annotations

import os

from conftest import kafkafs


def test_topics_lifecycle(tmp_path):
    d = str(tmp_path / "logs")
    r = kafkafs("topics", "--log-dirs", d, "--create", "--topic", "orders", "--partitions", "3",
                "--config", "retention.ms=1000")
    assert r.stdout == b"Created topic orders.\n"
    assert sorted(n for n in os.listdir(d) if n.startswith("orders-")) == \
        ["orders-0", "orders-1", "orders-2"]
    assert kafkafs("topics", "--log-dirs", d, "--list").stdout == b"orders\n"
    desc = kafkafs("topics", "--log-dirs", d, "--describe", "--topic", "orders").stdout.decode()
    first = desc.splitlines()[0]
    assert first.startswith("Topic: orders\tTopicId: ") and "PartitionCount: 3" in first
    assert "Configs: retention.ms=1000" in first
    assert desc.count("\tPartition: ") == 3
    r = kafkafs("topics", "--log-dirs", d, "--create", "--topic", "orders", check=False)
    assert r.returncode == 1 and b"already exists" in r.stderr
    r = kafkafs("topics", "--log-dirs", d, "--create", "--topic", "bad name", check=False)
    assert r.returncode == 1 and b"illegal" in r.stderr
    kafkafs("topics", "--log-dirs", d, "--alter", "--topic", "orders", "--partitions", "4",
            "--config", "segment.bytes=2048", "--delete-config", "retention.ms")
    desc = kafkafs("topics", "--log-dirs", d, "--describe", "--topic", "orders").stdout.decode()
    assert "PartitionCount: 4" in desc and "Configs: segment.bytes=2048" in desc
    kafkafs("topics", "--log-dirs", d, "--delete", "--topic", "orders")
    assert kafkafs("topics", "--log-dirs", d, "--list").stdout == b""
    assert not any(n.startswith("orders") for n in os.listdir(d))


def test_produce_consume_with_console_properties(tmp_path):
    d = str(tmp_path / "logs")
    kafkafs("topics", "--log-dirs", d, "--create", "--topic", "t", "--partitions", "2")
    kafkafs("produce", "--log-dirs", d, "--topic", "t", "--property", "parse.key=true",
            "--property", "key.separator=:", input=b"a:1\nb:2\na:3\nc:4\n")
    out = kafkafs("consume", "--log-dirs", d, "--topic", "t", "--from-beginning",
                  "--timeout-ms", "200", "--property", "print.key=true",
                  "--property", "print.partition=true", "--property", "print.offset=true")
    lines = sorted(out.stdout.decode().splitlines())
    # murmur2 keeps each key on one partition, in order
    by_key = {}
    for line in lines:
        part, off, key, value = line.split("\t")
        assert part.startswith("Partition:") and off.startswith("Offset:")
        by_key.setdefault(key, set()).add(part)
    assert all(len(parts) == 1 for parts in by_key.values())
    assert b"Processed a total of 4 messages" in out.stderr
    # a single partition from an offset, with timestamps
    r = kafkafs("consume", "--log-dirs", d, "--topic", "t", "--partition",
                by_key["a"].pop().split(":")[1], "--offset", "earliest", "--timeout-ms", "300",
                "--property", "print.timestamp=true", "--property", "print.key=true")
    rows = [line.split("\t") for line in r.stdout.decode().splitlines()]
    assert all(ts.startswith("CreateTime:") for ts, _k, _v in rows)
    assert [v for _ts, k, v in rows if k == "a"] == ["1", "3"]
    r = kafkafs("produce", "--log-dirs", d, "--topic", "t", "--property", "parse.key=true",
                input=b"no-separator\n", check=False)
    assert r.returncode == 1 and b"No key separator found on line number 1" in r.stderr


def test_consume_from_latest_gets_nothing_old_and_get_offsets(tmp_path):
    d = str(tmp_path / "logs")
    kafkafs("produce", "--log-dirs", d, "--topic", "t", "--partition", "0",
            input=b"".join(b"m%d\n" % i for i in range(10)))
    r = kafkafs("consume", "--log-dirs", d, "--topic", "t", "--timeout-ms", "200")
    assert r.stdout == b""
    assert kafkafs("get-offsets", "--log-dirs", d, "--topic", "t").stdout == b"t:0:10\n"
    assert kafkafs("get-offsets", "--log-dirs", d, "--time", "-2").stdout == b"t:0:0\n"
    assert kafkafs("get-offsets", "--log-dirs", d, "--time", "99999999999999").stdout == \
        b"t:0:\n"
    assert kafkafs("get-offsets", "--log-dirs", d, "--time", "0").stdout == b"t:0:0\n"
    r = kafkafs("consume", "--log-dirs", d, "--topic", "t", "--offset", "3", check=False)
    assert r.returncode == 1 and b"partition is required" in r.stderr


def test_dump_of_what_produce_wrote(tmp_path):
    d = str(tmp_path / "logs")
    kafkafs("produce", "--log-dirs", d, "--topic", "t", input=b"hello\nworld\n")
    seg = os.path.join(d, "t-0", "00000000000000000000.log")
    out = kafkafs("dump", "--files", seg, "--print-data-log").stdout.decode().splitlines()
    assert out[0] == f"Dumping {seg}"
    assert out[1] == "Log starting offset: 0"
    assert out[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 ")
    assert "isvalid: true" in out[2] and "compresscodec: none" in out[2]
    assert out[3].startswith("| offset: 0 CreateTime: ") and out[3].endswith("payload: hello")
