"""The command line on a log dir without a daemon: kafka-topics, console producer and
consumer, get-offsets, with Kafka's option names and output lines."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

from conftest import ROOT, kafkafs, sh
from producer_batches import check_batches, random_lines, read_batches, values

from kafkafs.cli.main import main
from kafkafs.log.partitioner import partition_for_key
from kafkafs.record.producer_batch import ESTIMATOR


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


# -- consume --max-messages / --offset, get-offsets --time, the formatter's properties --------
# Compared with kafka-console-consumer.sh (ConsoleConsumer, ConsoleConsumerOptions,
# DefaultMessageFormatter) and kafka-get-offsets.sh (GetOffsetShell) given the same options.

def run(*args, input=b""):
    """``kafkafs ARGS`` in-process through the command's entry point, as test_dump_legacy
    does (a subprocess costs 0.3 s of interpreter start; these tests run it ~70 times):
    (exit status, stdout bytes, stderr bytes). The streams are binary underneath because
    ``consume`` writes ``sys.stdout.buffer``. Use :func:`kafkafs` where the process itself
    matters (an uncaught exception's status and traceback)."""
    out, err = io.BytesIO(), io.BytesIO()
    streams = (io.TextIOWrapper(io.BytesIO(input), encoding="utf-8"),
               io.TextIOWrapper(out, encoding="utf-8", write_through=True),
               io.TextIOWrapper(err, encoding="utf-8", write_through=True))
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        status = main(list(args))
    except SystemExit as exc:  # argparse
        status = exc.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        for s in streams:
            s.flush()
    return status, out.getvalue(), err.getvalue()


def produce(d, topic, values, *extra):
    """``kafkafs produce`` of ``values`` (one line each) to partition 0 of ``topic``: one
    batch per call."""
    status, _out, err = run("produce", "--log-dirs", d, "--topic", topic, "--partition", "0",
                            *extra, input=b"".join(v + b"\n" for v in values))
    assert status == 0, err


def consume(d, topic, *args):
    """``kafkafs consume``: (exit status, stdout, the last stderr line)."""
    status, out, err = run("consume", "--log-dirs", d, "--topic", topic, *args)
    return status, out, err.decode().splitlines()[-1]


def lines(prefix: bytes, offsets) -> bytes:
    return b"".join(b"%s%d\n" % (prefix, i) for i in offsets)


def test_consume_max_messages_prints_exactly_n_records(tmp_path):
    """``--max-messages N`` prints the first N records from where consumption starts and
    exits as soon as it has them (ConsoleConsumer's ``while (messageCount < maxMessages)``;
    the 30 s ``--timeout-ms`` only bounds a regression), partway into a batch and across
    batches; stderr ends with ``Processed a total of N messages`` as Kafka's
    reportRecordCount prints it."""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m%d" % i for i in range(10)])       # one batch: 0..9
    produce(d, "t", [b"m%d" % i for i in range(10, 15)])   # a second batch: 10..14
    t0 = time.monotonic()
    bound = ("--timeout-ms", "30000")
    assert consume(d, "t", "--from-beginning", "--max-messages", "3", *bound) == \
        (0, b"m0\nm1\nm2\n", "Processed a total of 3 messages")
    assert consume(d, "t", "--partition", "0", "--offset", "4", "--max-messages", "2",
                   *bound) == (0, b"m4\nm5\n", "Processed a total of 2 messages")
    assert consume(d, "t", "--partition", "0", "--offset", "8", "--max-messages", "4",
                   *bound) == (0, lines(b"m", range(8, 12)), "Processed a total of 4 messages")
    # exactly what exists: done at the last record, no wait for more
    assert consume(d, "t", "--partition", "0", "--offset", "earliest",
                   "--max-messages", "15", *bound) == \
        (0, lines(b"m", range(15)), "Processed a total of 15 messages")
    assert time.monotonic() - t0 < 5


def test_consume_max_messages_beyond_the_log_ends_after_the_timeout(tmp_path):
    """N larger than what exists: every record is printed, then ``--timeout-ms`` without a
    record ends the run with status 0 and the real count (Kafka: the consumer's
    TimeoutException ends ``process``, then ``Processed a total of 10 messages``)."""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m%d" % i for i in range(10)])
    t0 = time.monotonic()
    assert consume(d, "t", "--from-beginning", "--max-messages", "100",
                   "--timeout-ms", "300") == \
        (0, lines(b"m", range(10)), "Processed a total of 10 messages")
    assert time.monotonic() - t0 >= 0.3
    assert consume(d, "t", "--partition", "0", "--offset", "7", "--max-messages", "100",
                   "--timeout-ms", "10") == (0, b"m7\nm8\nm9\n", "Processed a total of 3 messages")


def test_consume_max_messages_zero_prints_nothing(tmp_path):
    """``--max-messages 0``: ConsoleConsumer's loop ``while (messageCount < maxMessages ||
    maxMessages == -1)`` never runs, so nothing is printed and the count is 0."""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m0", b"m1", b"m2"])
    assert consume(d, "t", "--from-beginning", "--max-messages", "0", "--timeout-ms", "10") \
        == (0, b"", "Processed a total of 0 messages")


def test_consume_numeric_offset_reads_exactly_from_that_offset(tmp_path):
    """``--partition 0 --offset N``: the records from N on and none before, N also inside a
    batch, plain or gzip-compressed (the batch is read from its base offset and the records
    before N are skipped, as a Kafka consumer does)."""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m%d" % i for i in range(10)])
    produce(d, "z", [b"z%d" % i for i in range(10)], "--compression-codec", "gzip")
    for topic, prefix in (("t", b"m"), ("z", b"z")):
        for n in (0, 5, 9):
            assert consume(d, topic, "--partition", "0", "--offset", str(n),
                           "--timeout-ms", "10") == \
                (0, lines(prefix, range(n, 10)), f"Processed a total of {10 - n} messages")


def test_consume_offset_latest_given_explicitly_prints_nothing_old(tmp_path):
    """``--offset latest`` starts at the log end offset: nothing already in the log is
    printed, as without ``--from-beginning``; ``--offset earliest`` starts at 0."""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m%d" % i for i in range(5)])
    assert consume(d, "t", "--partition", "0", "--offset", "latest", "--timeout-ms", "10") == \
        (0, b"", "Processed a total of 0 messages")
    assert consume(d, "t", "--partition", "0", "--offset", "earliest", "--timeout-ms", "10") \
        == (0, lines(b"m", range(5)), "Processed a total of 5 messages")


def test_consume_offset_past_the_end_prints_nothing(tmp_path):
    """An offset at or past the log end offset is no error in Kafka (the fetch is out of
    range and the console consumer's ``auto.offset.reset=latest`` moves it to the end):
    nothing is printed, the run ends after ``--timeout-ms`` with status 0."""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m%d" % i for i in range(5)])
    for n in ("5", "100"):
        assert consume(d, "t", "--partition", "0", "--offset", n, "--timeout-ms", "10") == \
            (0, b"", "Processed a total of 0 messages")


def test_consume_offset_past_the_end_then_follows_from_the_end(tmp_path):
    """Kafka resets an offset past the end to the log end offset right away (the console
    consumer's auto.offset.reset=latest), so records appended afterwards are printed even
    though their offsets are below the one asked for."""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m%d" % i for i in range(5)])
    consumer = subprocess.Popen([sys.executable, "-m", "kafkafs", "consume", "--log-dirs", d,
                                 "--topic", "t", "--partition", "0", "--offset", "100",
                                 "--timeout-ms", "2500"], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    time.sleep(1.0)
    produce(d, "t", [b"late5", b"late6"])
    out, err = consumer.communicate(timeout=30)
    assert (consumer.returncode, out) == (0, b"late5\nlate6\n"), err
    assert err.decode().splitlines()[-1] == "Processed a total of 2 messages"


INVALID_OFFSET = ("error: The provided offset value '{}' is incorrect. Valid values are "
                  "'earliest', 'latest', or a non-negative long.")


def test_consume_rejects_a_negative_offset(tmp_path):
    """A negative ``--offset`` is a usage error in Kafka (ConsoleConsumerOptions.parseOffset
    calls invalidOffset: ``The provided offset value '-5' is incorrect. Valid values are
    'earliest', 'latest', or a non-negative long.``): status 1, that message after
    ``error:``, no record printed -- not a read from the log start."""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m%d" % i for i in range(5)])
    status, out, err = run("consume", "--log-dirs", d, "--topic", "t", "--partition", "0",
                           "--offset", "-5", "--timeout-ms", "10")
    assert (status, out) == (1, b""), (out, err)
    assert INVALID_OFFSET.format("-5").encode() in err, err


def test_consume_rejects_a_non_numeric_offset(tmp_path):
    """A non-numeric or fractional ``--offset`` is the same usage error (Kafka's
    NumberFormatException path of parseOffset): status 1, the message after ``error:``,
    no traceback. Run as a process: an uncaught exception's status and stderr are what is
    checked."""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m%d" % i for i in range(5)])
    for bad in ("abc", "1.5"):
        r = kafkafs("consume", "--log-dirs", d, "--topic", "t", "--partition", "0",
                    "--offset", bad, "--timeout-ms", "10", check=False)
        assert b"Traceback" not in r.stderr, (bad, r.stderr)
        assert (r.returncode, r.stdout) == (1, b""), (bad, r.stdout, r.stderr)
        assert INVALID_OFFSET.format(bad).encode() in r.stderr, (bad, r.stderr)


def test_consume_offset_keywords_are_case_insensitive(tmp_path):
    """ConsoleConsumerOptions.parseOffset lower-cases the value: ``EARLIEST`` is
    ``earliest``, ``Latest`` is ``latest``. (Run as a process, as the test above.)"""
    d = str(tmp_path / "logs")
    produce(d, "t", [b"m0", b"m1", b"m2"])
    for word, expect in (("EARLIEST", b"m0\nm1\nm2\n"), ("Latest", b"")):
        r = kafkafs("consume", "--log-dirs", d, "--topic", "t", "--partition", "0",
                    "--offset", word, "--timeout-ms", "10", check=False)
        assert (r.returncode, r.stdout) == (0, expect), (word, r.stderr)


def log_with_start_offset(manager_factory, d, *, delete_records_to=None) -> int:
    """Topic ``r``, one partition: offsets 0-2 and 3-4 in two segments timestamped 30 days
    back, 5-7 (now) in the active one; retention (7 days) deletes the old two: log start
    offset 5. ``delete_records_to`` then moves the log start offset into the active
    segment, as a broker's DeleteRecords (kafka-delete-records.sh) does; the manager's
    shutdown writes it to log-start-offset-checkpoint. Returns the log start offset."""
    m = manager_factory(dirs=[d])
    m.create_topic("r", 1)
    lg = m.get_log("r", 0)
    old = int(time.time() * 1000) - 30 * 24 * 3600 * 1000
    lg.append([(old + i, None, b"r%d" % i, ()) for i in range(3)])
    lg.roll()
    lg.append([(old + i, None, b"r%d" % i, ()) for i in range(3, 5)])
    lg.roll()
    now = int(time.time() * 1000)
    lg.append([(now, None, b"r%d" % i, ()) for i in range(5, 8)])
    assert m.apply_retention() == 2
    lg.remove_deleted_segments(force=True)
    if delete_records_to is not None:
        with lg.lock:
            lg.log_start_offset = delete_records_to
    start = lg.log_start_offset
    m.shutdown()
    return start


def test_consume_earliest_starts_at_a_log_start_offset_above_zero(tmp_path, manager_factory):
    """After retention deleted the first segments, ``--offset earliest`` and
    ``--from-beginning`` start at the log start offset (5), which ``get-offsets --time -2``
    reports."""
    d = str(tmp_path / "logs")
    assert log_with_start_offset(manager_factory, d) == 5
    assert run("get-offsets", "--log-dirs", d, "--time", "-2") == (0, b"r:0:5\n", b"")
    assert run("get-offsets", "--log-dirs", d, "--time", "-1") == (0, b"r:0:8\n", b"")
    assert consume(d, "r", "--partition", "0", "--offset", "earliest", "--timeout-ms", "10") \
        == (0, b"r5\nr6\nr7\n", "Processed a total of 3 messages")
    assert consume(d, "r", "--from-beginning", "--timeout-ms", "10") == \
        (0, b"r5\nr6\nr7\n", "Processed a total of 3 messages")


def test_consume_never_prints_a_record_below_the_log_start_offset(tmp_path, manager_factory):
    """A log start offset inside a segment (DeleteRecords up to 6): ``earliest`` starts at 6,
    and no record below the log start offset is printed whatever ``--offset`` asks for
    (Kafka never returns one: the fetch is out of range, and the console consumer's
    ``auto.offset.reset=latest`` then prints nothing old)."""
    d = str(tmp_path / "logs")
    assert log_with_start_offset(manager_factory, d, delete_records_to=6) == 6
    assert run("get-offsets", "--log-dirs", d, "--time", "-2") == (0, b"r:0:6\n", b"")
    assert consume(d, "r", "--partition", "0", "--offset", "earliest", "--timeout-ms", "10") \
        == (0, b"r6\nr7\n", "Processed a total of 2 messages")
    assert consume(d, "r", "--from-beginning", "--timeout-ms", "10")[1] == b"r6\nr7\n"
    for n in ("0", "5"):  # out of range: reset to the log end offset, as Kafka's is
        assert consume(d, "r", "--partition", "0", "--offset", n, "--timeout-ms", "10") == \
            (0, b"", "Processed a total of 0 messages"), n


def timestamped_log(manager_factory, d):
    """Topic ``g``, two partitions. Partition 0: offsets 0..4 with CreateTime timestamps
    1000, 2000 | 4000 | 3000, 5000 (three batches; out of order on purpose). Partition 1:
    one record at 10000."""
    m = manager_factory(dirs=[d])
    m.create_topic("g", 2)
    lg = m.get_log("g", 0)
    lg.append([(1000, b"k0", b"v0", ()), (2000, b"k1", b"v1", ())])
    lg.append([(4000, b"k2", b"v2", ())])
    lg.append([(3000, b"k3", b"v3", ()), (5000, b"k4", b"v4", ())])
    m.get_log("g", 1).append([(10000, None, b"w0", ())])
    m.shutdown()


def get_offsets(d, *args) -> bytes:
    status, out, err = run("get-offsets", "--log-dirs", d, *args)
    assert (status, err) == (0, b"")
    return out


def test_get_offsets_latest_and_earliest_given_explicitly(tmp_path, manager_factory):
    """``--time -1``: the log end offset (the default); ``--time -2``: the log start offset;
    ``--time -3``: the offset of the largest timestamp; one ``topic:partition:offset`` line
    per partition, ``--partitions`` picks some; a bad ``--time`` is an error."""
    d = str(tmp_path / "logs")
    timestamped_log(manager_factory, d)
    assert get_offsets(d, "--topic", "g", "--time", "-1") == b"g:0:5\ng:1:1\n"
    assert get_offsets(d, "--topic", "g") == b"g:0:5\ng:1:1\n"
    assert get_offsets(d, "--topic", "g", "--time", "-2") == b"g:0:0\ng:1:0\n"
    assert get_offsets(d, "--topic", "g", "--time", "-3") == b"g:0:4\ng:1:0\n"
    assert get_offsets(d, "--topic", "g", "--partitions", "1", "--time", "-1") == b"g:1:1\n"
    assert get_offsets(d, "--partitions", "0", "--time", "-2") == b"g:0:0\n"
    # GetOffsetShell's names for them (earliest-local, -4: the log start, nothing is tiered)
    for name, code in (("latest", "-1"), ("earliest", "-2"), ("max-timestamp", "-3"),
                       ("earliest-local", "-4")):
        assert get_offsets(d, "--topic", "g", "--time", name) == \
            get_offsets(d, "--topic", "g", "--time", "-2" if code == "-4" else code)
    for bad in ("soon", "-5", "Latest"):
        assert run("get-offsets", "--log-dirs", d, "--time", bad) == \
            (1, b"", b"error: Malformed time argument " + bad.encode() + b". Please use -1 or "
             b"latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local, or a "
             b"specified long format timestamp\n")


def test_get_offsets_by_timestamp_is_the_first_offset_at_or_after_it(tmp_path,
                                                                     manager_factory):
    """``--time T``: the first offset whose timestamp is >= T (ListOffsets, Kafka's
    ``fetchOffsetByTimestamp``), not the record with the nearest timestamp: with timestamps
    1000, 2000, 4000, 3000, 5000 at offsets 0..4, T=2500 and T=3000 both give offset 2
    (4000). After the last timestamp the partition's line has an empty offset
    (docs/cli.md)."""
    d = str(tmp_path / "logs")
    timestamped_log(manager_factory, d)
    expect = {0: 0, 1000: 0, 1001: 1, 2000: 1, 2001: 2, 2500: 2, 3000: 2, 4000: 2,
              4001: 4, 5000: 4}
    for t, offset in expect.items():
        assert get_offsets(d, "--topic", "g", "--partitions", "0", "--time", str(t)) == \
            f"g:0:{offset}\n".encode(), t
    assert get_offsets(d, "--topic", "g", "--time", "5001") == b"g:0:\ng:1:0\n"
    assert get_offsets(d, "--topic", "g", "--time", "10000") == b"g:0:\ng:1:0\n"
    assert get_offsets(d, "--topic", "g", "--time", "10001") == b"g:0:\ng:1:\n"


def formatter_log(manager_factory, d):
    """Topic ``f``, one partition: (ts 1000, key k0, value v0, headers h1=x, h2=null),
    (ts 2000, null key, value v1, no headers), (ts 3000, key k2, null value)."""
    m = manager_factory(dirs=[d])
    m.create_topic("f", 1)
    m.get_log("f", 0).append([(1000, b"k0", b"v0", [("h1", b"x"), ("h2", None)]),
                              (2000, None, b"v1", ()),
                              (3000, b"k2", None, ())])
    m.shutdown()


def formatted(d, *props) -> bytes:
    """What ``consume --from-beginning`` of topic ``f`` prints with ``--property`` each of
    ``props``."""
    args = [a for p in props for a in ("--property", p)]
    status, out, last = consume(d, "f", "--from-beginning", "--timeout-ms", "10", *args)
    assert (status, last) == (0, "Processed a total of 3 messages")
    return out


def test_consume_print_properties_with_separators(tmp_path, manager_factory):
    """DefaultMessageFormatter's columns in its order (timestamp, partition, offset,
    headers, key, value) joined by ``key.separator``, each record ended by
    ``line.separator``; ``null.literal`` for a null key, value or header value;
    ``headers.separator`` between headers and ``NO_HEADERS`` when there are none; the last
    column printed ends the line, whichever it is."""
    d = str(tmp_path / "logs")
    formatter_log(manager_factory, d)
    assert formatted(d, "print.timestamp=true", "print.partition=true", "print.offset=true",
                     "print.key=true", "key.separator= | ") == (
        b"CreateTime:1000 | Partition:0 | Offset:0 | k0 | v0\n"
        b"CreateTime:2000 | Partition:0 | Offset:1 | null | v1\n"
        b"CreateTime:3000 | Partition:0 | Offset:2 | k2 | null\n")
    assert formatted(d, "print.key=true", "print.offset=true", "key.separator=:",
                     "line.separator=;", "null.literal=<nil>") == \
        b"Offset:0:k0:v0;Offset:1:<nil>:v1;Offset:2:k2:<nil>;"
    assert formatted(d, "print.headers=true") == \
        b"h1:x,h2:null\tv0\nNO_HEADERS\tv1\nNO_HEADERS\tnull\n"
    assert formatted(d, "print.headers=true", "print.key=true", "headers.separator=&",
                     "null.literal=NULL") == \
        b"h1:x&h2:NULL\tk0\tv0\nNO_HEADERS\tNULL\tv1\nNO_HEADERS\tk2\tNULL\n"
    assert formatted(d, "print.key=true", "print.value=false") == b"k0\nnull\nk2\n"
    assert formatted(d, "print.partition=true", "print.value=false", "line.separator=|") == \
        b"Partition:0|Partition:0|Partition:0|"
    # getBoolProperty: trimmed, case-insensitive "true"; anything else is false
    assert formatted(d, "print.offset= TRUE ", "print.key=yes", "print.value=False") == \
        b"Offset:0\nOffset:1\nOffset:2\n"
    # backslash escapes in the separators (kafkafs: a shell cannot pass a tab easily)
    assert formatted(d, "print.offset=true", "key.separator=\\t", "line.separator=\\r\\n") == \
        b"Offset:0\tv0\r\nOffset:1\tv1\r\nOffset:2\tnull\r\n"


def test_consume_print_timestamp_names_log_append_time(tmp_path):
    """A topic with ``message.timestamp.type=LogAppendTime``: ``print.timestamp`` prints
    ``LogAppendTime:<ms>`` (TimestampType's name), the time of the append."""
    d = str(tmp_path / "logs")
    assert run("topics", "--log-dirs", d, "--create", "--topic", "la", "--config",
               "message.timestamp.type=LogAppendTime")[0] == 0
    before = int(time.time() * 1000)
    produce(d, "la", [b"a", b"b"])
    after = int(time.time() * 1000)
    _status, out, _last = consume(d, "la", "--from-beginning", "--timeout-ms", "10",
                                  "--property", "print.timestamp=true")
    rows = [line.split("\t") for line in out.decode().splitlines()]
    assert [v for _ts, v in rows] == ["a", "b"]
    for ts, _v in rows:
        kind, ms = ts.split(":")
        assert kind == "LogAppendTime" and before <= int(ms) <= after


def test_consume_non_ascii_separators_are_written_as_utf8(tmp_path, manager_factory):
    """``key.separator`` and ``line.separator`` are written as their UTF-8 bytes
    (DefaultMessageFormatter.getByteProperty: ``getBytes(UTF_8)``): ``→`` is ``e2 86 92``,
    not the UTF-8 of its bytes read as Latin-1."""
    d = str(tmp_path / "logs")
    formatter_log(manager_factory, d)
    assert formatted(d, "print.key=true", "key.separator=→", "line.separator=¶\n") == \
        "k0→v0¶\nnull→v1¶\nk2→null¶\n".encode()


def test_consume_with_every_column_off_prints_nothing(tmp_path, manager_factory):
    """``print.value=false`` and no other column: DefaultMessageFormatter writes nothing for
    a record, not even ``line.separator`` (a separator only follows a column)."""
    d = str(tmp_path / "logs")
    formatter_log(manager_factory, d)
    assert formatted(d, "print.value=false") == b""


# -- produce: batches the way kafka-console-producer's producer makes them -----------------
# Checked with kafka-python against the Java producer's rule (tests/producer_batches.py).
# Before batch.size, produce wrote each 1000 lines read as one batch per partition.

def _input(lines) -> bytes:
    return b"".join(x + b"\n" for x in lines)


def test_produce_cuts_batches_at_batch_size(tmp_path):
    """``--producer-property batch.size=1000``: each batch takes records while they have
    room; a line longer than batch.size is a batch of its own; nothing is lost."""
    d = str(tmp_path / "logs")
    lines = random_lines(1500, 11, longest=200)
    lines[7] = b"7 " + b"z" * 3000
    status, _out, err = run("produce", "--log-dirs", d, "--topic", "t", "--partition", "0",
                            "--producer-property", "batch.size=1000", input=_input(lines))
    assert status == 0, err
    batches = read_batches(os.path.join(d, "t-0"))
    assert values(batches) == lines
    check_batches(batches, 1000, {len(lines) - 1})
    assert [len(b.records) for b in batches if b.records[0].offset == 7] == [1]


def test_produce_batch_size_defaults_to_the_topics(tmp_path):
    """Without an option produce uses the topic's ``kafkafs.batch.size`` (default 16384,
    Kafka's producer default)."""
    d = str(tmp_path / "logs")
    assert run("topics", "--log-dirs", d, "--create", "--topic", "small", "--config",
               "kafkafs.batch.size=700")[0] == 0
    lines = random_lines(3000, 12)
    for topic, size in (("small", 700), ("plain", 16384)):
        status, _out, err = run("produce", "--log-dirs", d, "--topic", topic,
                                input=_input(lines))
        assert status == 0, err
        batches = read_batches(os.path.join(d, f"{topic}-0"))
        assert values(batches) == lines
        check_batches(batches, size, {len(lines) - 1})


def test_produce_records_without_key_stick_to_a_partition_per_batch(tmp_path):
    """Records without a key fill a batch of one partition, then move to the next (Kafka's
    sticky partitioner): in line order the batches go round the partitions, each closed
    only when the next line has no room."""
    d = str(tmp_path / "logs")
    assert run("topics", "--log-dirs", d, "--create", "--topic", "t", "--partitions",
               "3")[0] == 0
    lines = random_lines(900, 13, longest=150)
    status, _out, err = run("produce", "--log-dirs", d, "--topic", "t", "--producer-property",
                            "batch.size=600", input=_input(lines))
    assert status == 0, err
    placed = [(int(b.records[0].value.split()[0]), p, b)
              for p in range(3) for b in read_batches(os.path.join(d, f"t-{p}"))]
    placed.sort(key=lambda x: x[0])
    assert [p for _n, p, _b in placed] == [i % 3 for i in range(len(placed))]
    batches = [b for _n, _p, b in placed]
    assert values(batches) == lines
    check_batches(batches, 600)


def test_produce_keyed_batches_per_partition(tmp_path):
    """``parse.key``: each partition's records, in line order, are cut by the rule."""
    d = str(tmp_path / "logs")
    assert run("topics", "--log-dirs", d, "--create", "--topic", "t", "--partitions",
               "4")[0] == 0
    lines = random_lines(1200, 14, longest=100, keyed=True)
    status, _out, err = run("produce", "--log-dirs", d, "--topic", "t", "--property",
                            "parse.key=true", "--property", "key.separator=:",
                            "--batch-size", "800", input=_input(lines))
    assert status == 0, err
    for p in range(4):
        mine = [x for x in lines if partition_for_key(x.split(b":", 1)[0], 4) == p]
        batches = read_batches(os.path.join(d, f"t-{p}"))
        assert [r.key + b":" + r.value for b in batches for r in b.records] == mine
        check_batches(batches, 800, {len(mine) - 1})


def test_produce_compressed_batches_follow_the_ratio_estimate(tmp_path):
    """``--compression-codec gzip``: batches close by the estimated compressed size (the
    estimate starts at 1.0 for the topic and follows each batch written)."""
    d = str(tmp_path / "logs")
    ESTIMATOR.forget("gz")  # a new producer: in-process runs share the estimator
    lines = random_lines(4000, 15, longest=200)
    status, _out, err = run("produce", "--log-dirs", d, "--topic", "gz", "--partition", "0",
                            "--compression-codec", "gzip", "--producer-property",
                            "batch.size=3000", input=_input(lines))
    assert status == 0, err
    batches = read_batches(os.path.join(d, "gz-0"))
    assert values(batches) == lines and all(b.compressed for b in batches)
    check_batches(batches, 3000, {len(lines) - 1})


def test_produce_batch_size_options(tmp_path):
    """kafka-console-producer's precedence: ``--max-partition-memory-bytes`` over
    ``--batch-size`` over ``--producer-property batch.size``; a bad value fails in Kafka's
    words; other producer properties are ignored with a warning."""
    d = str(tmp_path / "logs")
    lines = random_lines(600, 16, longest=120)
    cases = [("a", ["--producer-property", "batch.size=500", "--batch-size", "900"], 900),
             ("b", ["--batch-size", "900", "--max-partition-memory-bytes", "700"], 700),
             ("c", ["--producer-property", "batch.size=650", "--producer-property",
                    "acks=all"], 650)]
    for topic, opts, size in cases:
        status, _out, err = run("produce", "--log-dirs", d, "--topic", topic, *opts,
                                input=_input(lines))
        assert status == 0, err
        check_batches(read_batches(os.path.join(d, f"{topic}-0")), size, {len(lines) - 1})
    assert b"producer property acks is ignored" in err
    for bad, rule in (("x", "Not a number of type INT"), ("-5", "Value must be at least 0")):
        status, _out, err = run("produce", "--log-dirs", d, "--topic", "e", "--batch-size", bad,
                                input=b"a\n")
        assert status == 1
        assert f"Invalid value {bad} for configuration batch.size: {rule}".encode() in err
    assert not os.path.exists(os.path.join(d, "e-0"))


# -- one convention for the log dirs: --log-dirs and --config in every command ---------------
# (issue 18 §1) The same option for the same thing everywhere; Kafka's names stay where a
# Kafka tool has them (dump --files, topics --config KEY=VALUE).

LOG_DIR_COMMANDS = ("topics", "produce", "consume", "get-offsets", "check", "dump", "compact",
                    "mount")


def server_properties(tmp_path, **props) -> str:
    """A server.properties naming ``tmp_path/logs`` as log.dirs (plus ``props``)."""
    path = tmp_path / "server.properties"
    lines = [f"log.dirs={tmp_path / 'logs'}"] + [f"{k.replace('_', '.')}={v}"
                                                   for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_every_command_documents_log_dirs_and_config():
    for command in LOG_DIR_COMMANDS:
        status, out, _err = run(command, "--help")
        text = out.decode()
        assert status == 0 and "--log-dirs DIR[,DIR...]" in text, (command, text)
        assert "--config FILE" in text and "--override KEY=VALUE" in text, (command, text)
        assert "--server-config" not in text, (command, text)  # an old spelling, not shown


def test_every_command_finds_the_log_dirs_of_config(tmp_path, monkeypatch):
    """``--config server.properties`` means the same in every command: its log.dirs. Before,
    ``topics --config FILE --list`` took the file for a topic config and listed
    ~/.local/share/kafkafs/logs, check had no --config for it... (kafkafs topics took
    --server-config, check a positional LOGDIR, dump rejected both)."""
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("KAFKAFS_LOG_DIRS", str(elsewhere))  # never used below
    conf = server_properties(tmp_path, num_partitions=2)
    logs = tmp_path / "logs"
    status, out, err = run("topics", "--config", conf, "--create", "--topic", "t",
                           "--config", "cleanup.policy=compact")
    assert (status, out, err) == (0, b"Created topic t.\n", b"")
    assert sorted(os.listdir(logs / "t-0")) and os.path.isdir(logs / "t-1")  # num.partitions
    assert run("topics", "--config", conf, "--list")[1] == b"t\n"
    desc = run("topics", "--describe", "--topic", "t", "--config", conf)[1].decode()
    assert "PartitionCount: 2" in desc and "Configs: cleanup.policy=compact" in desc
    assert run("produce", "--config", conf, "--topic", "t", "--partition", "0",
               "--property", "parse.key=true", input=b"a\t1\na\t2\nb\t3\n")[0] == 0
    status, out, _err = run("consume", "--config", conf, "--topic", "t", "--from-beginning",
                            "--timeout-ms", "100")
    assert (status, out) == (0, b"1\n2\n3\n")
    assert run("get-offsets", "--config", conf, "--topic", "t")[1] == b"t:0:3\nt:1:0\n"
    status, out, err = run("check", "--config", conf)
    assert status == 0 and out.decode().endswith(f"{logs}: 2 partition(s), clean\n"), out + err
    status, out, err = run("dump", "--config", conf, "--files", f"t-0/{0:020d}.log")
    assert status == 0 and out.decode().startswith(f"Dumping {logs}/t-0/{0:020d}.log\n"), err
    status, out, err = run("compact", "--config", conf, "--topic", "t", "--partition", "0",
                           "--no-progress")
    assert status == 0 and b"t-0" in out, err
    assert not elsewhere.exists()


def test_every_command_takes_log_dirs(tmp_path):
    d = str(tmp_path / "logs")
    assert run("topics", "--log-dirs", d, "--create", "--topic", "t")[0] == 0
    assert run("produce", "--log-dirs", d, "--topic", "t", input=b"x\n")[0] == 0
    status, out, err = run("check", "--log-dirs", d)
    assert status == 0 and out.decode().endswith("clean\n"), out + err
    status, out, err = run("dump", "--log-dirs", d, "--files", f"t-0/{0:020d}.log")
    assert status == 0 and b"baseOffset: 0 lastOffset: 0 count: 1" in out, err


def test_topics_config_is_a_file_without_equals_and_a_topic_config_with_it(tmp_path):
    """kafka-topics.sh's --config KEY=VALUE stays; a value without '=' (or with a '/'
    before it: a path) is the server.properties file."""
    odd = tmp_path / "a=b"
    odd.mkdir()
    conf = odd / "server.properties"
    conf.write_text(f"log.dirs={tmp_path / 'logs'}\n")
    status, _out, err = run("topics", "--config", str(conf), "--create", "--topic", "t",
                            "--config", "retention.ms=1000", "--config", "segment.ms=2000")
    assert status == 0, err
    desc = run("topics", "--log-dirs", str(tmp_path / "logs"), "--describe")[1].decode()
    assert "Configs: retention.ms=1000,segment.ms=2000" in desc
    assert "--config FILE|KEY=VALUE" in run("topics", "--help")[1].decode()


def test_old_spellings_work_with_one_deprecation_note(tmp_path):
    conf = server_properties(tmp_path)
    d = str(tmp_path / "logs")
    r = kafkafs("topics", "--server-config", conf, "--create", "--topic", "t")
    assert r.stdout == b"Created topic t.\n"
    assert r.stderr.decode().splitlines() == [
        f"kafkafs topics: note: --server-config is deprecated; use --config {conf}"]
    r = kafkafs("topics", "--server-config", conf, "--server-config", conf, "--list")
    assert r.stdout == b"t\n" and len(r.stderr.decode().splitlines()) == 1, r.stderr
    r = kafkafs("compact", "--server-config", conf, "--topic", "t", "--no-progress",
                check=False)
    assert r.stderr.decode().count("--server-config is deprecated") == 1, r.stderr
    r = kafkafs("check", d)
    assert r.stdout.decode().endswith("clean\n")
    assert r.stderr.decode().splitlines() == [
        f"kafkafs check: note: a LOGDIR argument is deprecated; use --log-dirs {d}"]
    r = kafkafs("check", d, "--log-dirs", d, check=False)
    assert r.returncode == 2 and b"give the log dirs once" in r.stderr


def test_dump_resolves_relative_files_in_the_log_dirs(tmp_path, monkeypatch):
    """With --log-dirs (or --config), a relative --files name is looked up in each log dir;
    without them, in the current directory as kafka-dump-log does."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    run("topics", "--log-dirs", a, "--create", "--topic", "t")
    run("topics", "--log-dirs", b, "--create", "--topic", "u")
    seg = f"{0:020d}.log"
    status, out, err = run("dump", "--log-dirs", f"{a},{b}",
                           "--files", f"u-0/{seg},t-0/{seg}")
    assert status == 0, err
    dumped = [x for x in out.decode().splitlines() if x.startswith("Dumping ")]
    assert dumped == [f"Dumping {b}/u-0/{seg}", f"Dumping {a}/t-0/{seg}"]
    status, out, err = run("dump", "--log-dirs", f"{a},{b}", "--files", f"v-0/{seg}")
    assert status == 1
    assert err.decode() == f"error: v-0/{seg}: no such file in the log dirs ({a}, {b})\n"
    monkeypatch.chdir(a)
    status, out, err = run("dump", "--files", f"t-0/{seg}")
    assert status == 0 and out.decode().startswith(f"Dumping t-0/{seg}\n"), err


# -- a writer refused because a daemon holds the log dir (issue 18 §2) ------------------------

def refusal_command(stderr: bytes, what: str, mnt: str, pid: int) -> str:
    """The command a writer's refusal offers for ``what``, after checking the refusal names
    the daemon's mount point and pid (one ``error:`` line, no traceback)."""
    lines = stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Failed to acquire lock on file "
                                                   ".lock in "), lines
    head = (f": the kafkafs daemon mounted at {mnt} (pid {pid}) holds it; {what} through "
            "its mount: ")
    assert head in lines[0], lines[0]
    return lines[0].split(head, 1)[1]


def test_writers_beside_a_daemon_name_its_mount_and_the_command(mount):
    """Each writer's refusal names the daemon's mount point and the command that does the
    job through it, and that command does it (before: "write through its mount point (e.g.
    >> MOUNT/<topic>/<partition>/append)", whatever the job)."""
    d, mnt, pid = mount.log_dirs[0], mount.mnt, mount.proc.pid

    def refused(*args, input=None):
        r = kafkafs(*args, "--log-dirs", d, input=input, check=False)
        assert r.returncode == 1 and r.stdout == b"", r
        return r.stderr

    err = refused("topics", "--create", "--topic", "orders", "--partitions", "3",
                  "--config", "retention.ms=100000")
    cmd = refusal_command(err, "create the topic", mnt, pid)
    assert cmd == (f"mkdir {mnt}/orders && mkdir {mnt}/orders/2 && printf '%s\\n' "
                   f"retention.ms=100000 > {mnt}/orders/config")
    assert sh(cmd).returncode == 0
    assert sorted(os.listdir(mount.path("orders")))[:3] == ["0", "1", "2"]
    with open(mount.path("orders", "config")) as f:
        assert "# (override)\nretention.ms=100000\n" in f.read()

    err = refused("produce", "--topic", "orders", "--partition", "2", input=b"a\nb\n")
    cmd = refusal_command(err, "append the records", mnt, pid)
    assert cmd == f"cat LINES >> {mnt}/orders/2/append"
    assert sh(cmd.replace("cat LINES", "printf 'a\\nb\\n'")).returncode == 0
    with open(mount.path("orders", "2", "messages"), "rb") as f:
        assert f.read() == b"a\nb\n"
    err = refused("produce", "--topic", "fresh", input=b"a\n")
    assert refusal_command(err, "append the records", mnt, pid) == \
        f"mkdir {mnt}/fresh && cat LINES >> {mnt}/fresh/0/append"

    err = refused("topics", "--alter", "--topic", "orders", "--partitions", "5")
    cmd = refusal_command(err, "change the topic", mnt, pid)
    assert cmd == f"mkdir {mnt}/orders/4"
    assert sh(cmd).returncode == 0 and os.path.isdir(mount.path("orders", "4"))
    err = refused("topics", "--alter", "--topic", "orders", "--config", "segment.ms=60000",
                  "--delete-config", "retention.ms")
    assert refusal_command(err, "change the topic", mnt, pid) == (
        f"edit {mnt}/orders/config (set segment.ms=60000; remove retention.ms; writing it "
        "replaces the topic's overrides)")

    # compact goes through the daemon serving exactly its log dirs; with one more it is
    # refused, and told the setxattr that runs the pass through the mount
    other = os.path.join(os.path.dirname(d), "other")
    r = kafkafs("compact", "--log-dirs", f"{d},{other}", "--topic", "orders", check=False)
    assert r.returncode == 1
    assert refusal_command(r.stderr, "run the cleaner pass", mnt, pid) == \
        f"setfattr -n user.kafkafs.compact -v now {mnt}/orders"
    err = refused("topics", "--delete", "--topic", "orders")
    cmd = refusal_command(err, "delete the topic", mnt, pid)
    assert cmd == f"rmdir {mnt}/orders"
    assert sh(cmd).returncode == 0 and not os.path.exists(mount.path("orders"))


def test_writer_beside_a_process_that_is_no_kafkafs_daemon(tmp_path):
    """A broker holds the lock (here: a process taking it as Java's FileLock does): the
    refusal says it is not a kafkafs daemon and points to the broker's own tool."""
    d = str(tmp_path / "logs")
    kafkafs("topics", "--log-dirs", d, "--create", "--topic", "t")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         ("import fcntl, os, time\n"
          f"fd = os.open({os.path.join(d, '.lock')!r}, os.O_RDWR)\n"
          "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
          "print('locked', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"locked\n"
        r = kafkafs("topics", "--log-dirs", d, "--create", "--topic", "u", check=False)
        (line,) = r.stderr.decode().splitlines()
        assert r.returncode == 1 and line.startswith(
            f"error: Failed to acquire lock on file .lock in {d}: pid {holder.pid} (")
        assert line.endswith(", which is not a kafkafs daemon (a Kafka broker?); create the "
                             "topic with the broker's own tools (kafka-topics.sh "
                             "--bootstrap-server ...), or stop it first"), line
        r = kafkafs("produce", "--log-dirs", d, "--topic", "t", input=b"x\n", check=False)
        assert b"kafka-console-producer.sh --bootstrap-server" in r.stderr, r.stderr
    finally:
        holder.kill()
        holder.wait()


def test_commands_on_one_topic_load_only_its_partitions(tmp_path, monkeypatch):
    """Issue 19: on a log dir of many partitions, produce to one topic, get-offsets,
    consume, topics --describe/--alter/--delete of one topic load that topic's partitions
    only (a lazy LogManager: the others are listed, never opened), and the log dir keeps
    everything else as it was."""
    from kafkafs.log import manager as manager_module

    d = str(tmp_path / "logs")
    for t in ("a", "b", "c", "d"):
        assert run("topics", "--log-dirs", d, "--create", "--topic", t,
                   "--partitions", "5")[0] == 0
    loaded = []
    real = manager_module.load_log

    def recording(pdir, topic, partition, *args, **kw):
        loaded.append((topic, partition))
        return real(pdir, topic, partition, *args, **kw)

    monkeypatch.setattr(manager_module, "load_log", recording)

    def topics_loaded(*args, input=b""):
        loaded.clear()
        status, out, err = run(*args, "--log-dirs", d, input=input)
        assert status == 0, err
        return {t for t, _p in loaded}, out

    assert topics_loaded("produce", "--topic", "b", input=b"one line\n")[0] == {"b"}
    assert topics_loaded("produce", "--topic", "b", "--partition", "3",
                         input=b"x\n") == ({"b"}, b"")
    assert loaded == [("b", 3)]
    assert topics_loaded("get-offsets", "--topic", "b")[0] == {"b"}
    got, out = topics_loaded("consume", "--topic", "b", "--from-beginning",
                             "--timeout-ms", "50")
    assert got == {"b"} and sorted(out.splitlines()) == [b"one line", b"x"]
    assert topics_loaded("topics", "--describe", "--topic", "c")[0] == {"c"}
    assert topics_loaded("topics", "--alter", "--topic", "c", "--partitions", "6")[0] == set()
    assert topics_loaded("topics", "--delete", "--topic", "a")[0] == set()
    assert topics_loaded("topics", "--list") == (set(), b"b\nc\nd\n")
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    status, out, _err = run("get-offsets", "--log-dirs", d)
    assert status == 0 and out.count(b"\n") == 16 and b"b:3:1\n" in out
