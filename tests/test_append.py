"""Writing ``append`` from the shell (kafkafs.fs.append): a line that is refused — longer
than one batch of ``max.message.bytes``, without ``key.separator`` under ``parse.key`` —
fails the ``write`` that carries it (or, for a writer that ignores short counts, its
``close``), never a command that exits 0 with the line gone, and nothing of it is stored;
the lines before it are, with a short count saying exactly which."""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys

import pytest
from conftest import ROOT, kafkafs, sh
from producer_batches import check_batches, random_lines, read_batches, values


def bash(cmd: str, **kw):
    """``cmd`` run by bash (its builtin echo and printf), output captured."""
    return sh(cmd, executable="/bin/bash", **kw)


def messages(m, topic="t") -> bytes:
    with open(m.path(topic, "0", "messages"), "rb") as f:
        return f.read()


BIG = 1_100_000  # a line longer than the default max.message.bytes (1048588)


@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["PYTHONUNBUFFERED=1", "buffered"])
def test_python_print_of_a_too_long_line_fails(mount, unbuffered):
    """``python3 -c "print('x'*1100000)" >> append`` exits non-zero with EMSGSIZE, buffered
    or not (the kernel cuts the write into 128 KiB requests and turns the error of a later
    one into a short count: the request carrying the rest of the line, or its newline,
    fails too), and no part of the line becomes a record; the next line goes in."""
    os.mkdir(mount.path("t"))
    app = mount.path("t", "0", "append")
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    r = bash(f"""python3 -c "print('x'*{BIG})" >> {app}""", env=env)
    assert r.returncode != 0, r.stderr
    assert b"Message too long" in r.stderr
    assert os.listdir(mount.path("t", "0", "offset")) == []
    assert bash(f"echo after >> {app}").returncode == 0
    assert messages(mount) == b"after\n"


def test_shell_writers_of_a_too_long_line_fail(mount, tmp_path):
    """bash's builtin echo and printf and ``dd`` exit 1 with EMSGSIZE for a line over
    max.message.bytes; what dd wrote before the line is stored, no part of the line is
    (nor the line after it in the same block: that write failed). dd writes the whole file
    in one 4 MiB block: the kernel sends it as 128 KiB requests, and the request holding the
    line's newline, failing, became a short count; the rest that dd then wrote again must
    not be taken for a new line."""
    os.mkdir(mount.path("t"))
    app = mount.path("t", "0", "append")
    long_line = f"$(head -c {BIG} /dev/zero | tr '\\0' y)"
    r = bash(f'echo "{long_line}" >> {app}')
    assert r.returncode == 1 and b"echo: write error: Message too long" in r.stderr
    r = bash(f"printf '%s\\n' \"{long_line}\" >> {app}")
    assert r.returncode == 1 and b"printf: write error: Message too long" in r.stderr
    src = tmp_path / "lines"
    src.write_bytes(b"before\n" + b"z" * 1048600 + b"\nafter\n")
    r = bash(f"dd if={src} of={app} bs=4M oflag=append conv=notrunc")
    assert r.returncode == 1 and b"Message too long" in r.stderr, r.stderr
    assert messages(mount) == b"before\n"
    assert bash(f"echo next >> {app}").returncode == 0
    assert messages(mount) == b"before\nnext\n"


def test_longest_line_that_fits_goes_in_and_one_byte_more_fails(mount_factory):
    """The limit is exact: a line whose one-record batch is max.message.bytes long is a
    record; one byte more fails the write at once, as a line without its newline too (it
    is never buffered to fail at close, where bash's printf would not see it)."""
    m = mount_factory(extra_args=["--override", "message.max.bytes=1000"])
    os.mkdir(m.path("t"))
    app = m.path("t", "0", "append")
    # 61 bytes of batch header, 1 + 7 of record: 930 bytes of value make 1000
    assert bash(f"printf '%930s\\n' x >> {app}").returncode == 0
    r = bash(f"printf '%931s\\n' y >> {app}")
    assert r.returncode == 1 and b"Message too long" in r.stderr
    r = bash(f"printf '%931s' z >> {app}")
    assert r.returncode == 1 and b"Message too long" in r.stderr
    assert messages(m) == b" " * 929 + b"x\n"
    assert os.path.getsize(m.path("t", "0", "offset", "0")) == 930


def test_a_writer_ignoring_the_short_count_hears_at_close(mount_factory):
    """Lines before a refused one in the same write go in, the write returns the short
    count covering exactly them; a writer that ignores it (``f.write`` of an unbuffered
    Python file) gets EMSGSIZE from ``close``. One that saw the error itself does not get it
    twice."""
    m = mount_factory(extra_args=["--override", "message.max.bytes=1000"])
    os.mkdir(m.path("t"))
    app = m.path("t", "0", "append")
    f = open(app, "ab", buffering=0)  # noqa: SIM115 (close is what is tested)
    assert f.write(b"a\nb\n" + b"x" * 2000 + b"\nc\n") == 4
    with pytest.raises(OSError) as e:
        f.close()
    assert e.value.errno == errno.EMSGSIZE
    with open(app, "ab", buffering=0) as f:
        assert f.write(b"d\n") == 2
        with pytest.raises(OSError) as e:
            f.write(b"y" * 2000 + b"\n")
        assert e.value.errno == errno.EMSGSIZE
        assert f.write(b"e\n") == 2
    assert messages(m) == b"a\nb\nd\ne\n"


def test_parse_key_keeps_the_lines_before_a_line_without_separator(mount_factory):
    """``-o parse.key=true``: a write of ``e:5\\nnosep\\nf:6\\n`` stores ``e:5`` and returns
    the short count 4; the writer's next write, starting at the bad line, fails with
    EINVAL; ``cat`` of such a file exits 1 after the first line; bash's printf (a write
    per line) keeps the lines on both sides of the bad one and exits 1."""
    m = mount_factory(options=["parse.key=true,key.separator=:"])
    os.mkdir(m.path("t"))
    app = m.path("t", "0", "append")
    fd = os.open(app, os.O_WRONLY | os.O_APPEND)
    try:
        assert os.write(fd, b"e:5\nnosep\nf:6\n") == 4
        with pytest.raises(OSError) as e:
            os.write(fd, b"nosep\nf:6\n")
        assert e.value.errno == errno.EINVAL
        assert os.write(fd, b"f:6\n") == 4
    finally:
        os.close(fd)
    assert messages(m) == b"5\n6\n"
    assert [os.getxattr(m.path("t", "0", "offset", str(i)), "user.kafka.key")
            for i in (0, 1)] == [b"e", b"f"]
    src = m.path("..", "keyed")
    with open(src, "wb") as f:
        f.write(b"g:7\nnosep\nh:8\n")
    r = bash(f"cat {src} >> {app}")
    assert r.returncode == 1 and b"Invalid argument" in r.stderr
    r = bash(f"printf 'i:9\\nnosep\\nj:10\\n' >> {app}")
    assert r.returncode == 1 and b"Invalid argument" in r.stderr
    assert messages(m) == b"5\n6\n7\n9\n10\n"


def test_parse_key_line_too_long_after_good_ones(mount_factory):
    """Under parse.key too, a line over max.message.bytes after good ones in one write:
    the good ones go in with a short count, the rest fails with EMSGSIZE, and a too-long
    line split across writes leaves nothing of itself."""
    m = mount_factory(options=["parse.key=true,key.separator=:"],
                      extra_args=["--override", "message.max.bytes=1000"])
    os.mkdir(m.path("t"))
    fd = os.open(m.path("t", "0", "append"), os.O_WRONLY | os.O_APPEND)
    try:
        data = b"a:1\nb:2\nc:" + b"x" * 2000 + b"\nd:4\n"
        assert os.write(fd, data) == 8
        with pytest.raises(OSError) as e:
            os.write(fd, data[8:])
        assert e.value.errno == errno.EMSGSIZE
        assert os.write(fd, b"k:" + b"y" * 600) == 602
        with pytest.raises(OSError) as e:
            os.write(fd, b"y" * 600 + b"\ne:5\n")
        assert e.value.errno == errno.EMSGSIZE
        # the same bytes sent again (a retry after a short count) do not become a record
        with pytest.raises(OSError) as e:
            os.write(fd, b"y" * 600 + b"\ne:5\n")
        assert e.value.errno == errno.EMSGSIZE
        assert os.write(fd, b"e:5\n") == 4
    finally:
        os.close(fd)
    assert messages(m) == b"1\n2\n5\n"


# -- batches the way a producer makes them (batch.size) ------------------------------------
# Read back with kafka-python and checked against the Java producer's rule
# (tests/producer_batches.py). On the code before batch.size, a write request's lines went
# into batches of up to max.message.bytes (1 MiB) and every check here failed.

def write_chunks(path: str, lines: list[bytes], seed: int) -> set[int]:
    """Write ``lines`` to ``path`` in writes of whole lines, each under 64 KiB (one FUSE
    request each); returns the offsets of the last line of every write (where a batch may
    end short: the writer's ``linger.ms=0``)."""
    rnd = random.Random(seed)
    ends = set()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        i = 0
        while i < len(lines):
            j = min(len(lines), i + rnd.randint(1, 300))
            while sum(len(x) + 1 for x in lines[i:j]) > 60000:
                j -= 1
            data = b"".join(x + b"\n" for x in lines[i:j])
            assert os.write(fd, data) == len(data)
            ends.add(j - 1)
            i = j
    finally:
        os.close(fd)
    return ends


def partition_dir(m, topic: str, p: int = 0) -> str:
    return os.path.join(m.log_dirs[0], f"{topic}-{p}")


def test_append_cuts_batches_at_the_default_batch_size(mount):
    """Without any setting a batch closes at the producer's default batch.size, 16384
    bytes: a record goes into the open batch while it has room, the batch is closed when
    the next one has none (or the write ends); a line longer than batch.size is a batch of
    its own. ``dd bs=1M`` (128 KiB requests) gives batches no larger either, and every line
    is there, in order."""
    os.mkdir(mount.path("t"))
    lines = random_lines(3000, 1)
    lines[100] = b"long " + b"y" * 40000  # over batch.size: alone
    lines[101] = b"short"
    ends = write_chunks(mount.path("t", "0", "append"), lines, 2)
    batches = read_batches(partition_dir(mount, "t"))
    assert values(batches) == lines
    check_batches(batches, 16384, ends)
    assert [len(b.records) for b in batches if b.records[0].offset == 100] == [1]
    src = mount.path("..", "dd-lines")
    more = random_lines(6000, 3)
    with open(src, "wb") as f:
        f.write(b"".join(x + b"\n" for x in more))
    r = sh(f"dd if={src} of={mount.path('t', '0', 'append')} bs=1M oflag=append conv=notrunc")
    assert r.returncode == 0, r.stderr
    batches = read_batches(partition_dir(mount, "t"))
    assert values(batches) == lines + more
    assert all(b.size <= 16384 for b in batches if len(b.records) > 1)


def test_append_parse_key_batches_at_the_mount_option(mount_factory):
    """``-o batch.size=1500`` with ``parse.key``: keyed records are cut by the same rule
    (their keys count in their size)."""
    m = mount_factory(options=["parse.key=true,key.separator=:,batch.size=1500"])
    os.mkdir(m.path("t"))
    lines = random_lines(2000, 4, longest=120, keyed=True)
    ends = write_chunks(m.path("t", "0", "append"), lines, 5)
    batches = read_batches(partition_dir(m, "t"))
    assert [(r.key + b":" + r.value) for b in batches for r in b.records] == lines
    check_batches(batches, 1500, ends)
    assert len(batches) > 100


@pytest.mark.parametrize("codec", ["gzip", "lz4"])
def test_append_compressed_batches_follow_the_ratio_estimate(mount, codec):
    """A compressed topic: the batch closes when the records' bytes times the estimated
    compression ratio times 1.05, plus the next record, would pass batch.size; the estimate
    starts at 1.0 and follows each batch written (Kafka's CompressionRatioEstimator)."""
    os.mkdir(mount.path("t"))
    with open(mount.path("t", "config"), "w") as f:
        f.write(f"compression.type={codec}\nkafkafs.batch.size=4000\n")
    lines = random_lines(6000, 6, longest=200)
    ends = write_chunks(mount.path("t", "0", "append"), lines, 7)
    batches = read_batches(partition_dir(mount, "t"))
    assert values(batches) == lines
    assert all(b.compressed for b in batches)
    check_batches(batches, 4000, ends)
    # the estimate fell below 1: later batches hold more records than the first ones
    assert max(len(b.records) for b in batches[-20:]) > len(batches[0].records)


@pytest.mark.parametrize("codec", ["zstd", "snappy"])
def test_append_parse_key_compressed_reads_back_with_kafka_python(mount_factory, codec):
    """``parse.key`` on a compressed topic: the keyed records, encoded once to find the cut
    and then compressed as they are, read back with kafka-python key for key; the batches
    follow the ratio rule."""
    from kafka.record import MemoryRecords

    m = mount_factory(options=["parse.key=true,key.separator=:"])
    os.mkdir(m.path("t"))
    with open(m.path("t", "config"), "w") as f:
        f.write(f"compression.type={codec}\nkafkafs.batch.size=3000\n")
    lines = random_lines(3000, 8, longest=150, keyed=True)
    ends = write_chunks(m.path("t", "0", "append"), lines, 9)
    batches = read_batches(partition_dir(m, "t"))
    assert all(b.compressed for b in batches) and len(batches) > 20
    check_batches(batches, 3000, ends)
    got = []
    for name in sorted(os.listdir(partition_dir(m, "t"))):
        if name.endswith(".log"):
            with open(os.path.join(partition_dir(m, "t"), name), "rb") as f:
                records = MemoryRecords(f.read())
            while (batch := records.next_batch()) is not None:
                got += [r.key + b":" + r.value for r in batch]
    assert got == lines


def test_batch_size_precedence_and_zero(mount_factory):
    """The topic's ``kafkafs.batch.size`` (default: the broker's, here --override) sets
    the batch size of writers giving none; the mount's ``-o batch.size`` wins over both;
    ``batch.size=0`` makes every record a batch (as in Kafka)."""
    m = mount_factory(extra_args=["--override", "kafkafs.batch.size=2500"])
    for t in ("a", "b"):
        os.mkdir(m.path(t))
    with open(m.path("b", "config"), "w") as f:
        f.write("kafkafs.batch.size=5000\n")
    with open(m.path("b", "config"), "rb") as f:
        assert b"# (override)\nkafkafs.batch.size=5000\n" in f.read()
    lines = random_lines(1500, 8)
    ends = {t: write_chunks(m.path(t, "0", "append"), lines, 9) for t in ("a", "b")}
    check_batches(read_batches(partition_dir(m, "a")), 2500, ends["a"])
    check_batches(read_batches(partition_dir(m, "b")), 5000, ends["b"])
    assert m.umount() == 0
    m = mount_factory(options=["batch.size=0"],
                      extra_args=["--override", "kafkafs.batch.size=2500"])
    ends = write_chunks(m.path("b", "0", "append"), lines[:50], 10)
    batches = read_batches(partition_dir(m, "b"))
    assert values(batches) == lines + lines[:50]
    assert [len(b.records) for b in batches[-50:]] == [1] * 50


def test_bad_batch_size_is_refused(mount, tmp_path):
    """A bad ``-o batch.size`` stops the mount with Kafka's ConfigException words; a bad
    topic value is refused like any bad config line (EINVAL) and changes nothing."""
    os.mkdir(tmp_path / "mnt2")
    r = subprocess.run([sys.executable, "-m", "kafkafs", "mount", str(tmp_path / "mnt2"),
                        "--log-dirs", str(tmp_path / "logs2"), "-o", "batch.size=lots"],
                       capture_output=True, timeout=60, cwd=ROOT, check=False)
    assert r.returncode == 1
    assert b"Invalid value lots for configuration batch.size: Not a number of type INT" \
        in r.stderr
    os.mkdir(mount.path("t"))
    r = bash(f"echo kafkafs.batch.size=-1 > {mount.path('t', 'config')}")
    assert r.returncode != 0 and b"Invalid argument" in r.stderr
    with open(mount.path("t", "config"), "rb") as f:
        assert b"kafkafs.batch.size=16384\n" in f.read()
    r = kafkafs("topics", "--log-dirs", str(tmp_path / "logs3"), "--create", "--topic", "x",
                "--config", "kafkafs.batch.size=2147483648", check=False)
    assert r.returncode == 1 and b"Not a number of type INT" in r.stderr


@pytest.mark.parametrize("codec", ["lz4", "gzip"])
def test_compressed_batch_over_max_message_bytes_is_split(tmp_path, codec):
    """A compressed topic where ``batch.size`` lets a batch compress past
    ``max.message.bytes`` (lines that hardly compress; the ratio estimate starts at 1.0):
    the batch is split in halves until each part fits, and every line goes in, in order.
    A line that alone compresses past the limit is refused: the write's count stops right
    before it, the lines before it are stored, nothing of it is."""
    import base64

    from kafkafs.fs.append import LineWriter
    from kafkafs.log.config import LogConfig
    from kafkafs.log.errors import RecordTooLargeError
    from kafkafs.log.loader import load_log

    part = tmp_path / "t-0"
    part.mkdir()
    lg = load_log(str(part), "t", 0, LogConfig(compression_type=codec, max_message_bytes=3000),
                  had_clean_shutdown=True)
    rnd = random.Random(5)
    lines = [base64.b64encode(rnd.randbytes(rnd.randrange(20, 300))) for _ in range(600)]
    data = b"".join(x + b"\n" for x in lines)
    w = LineWriter(batch_size=60000)
    assert w.write(lg, data) == len(data)
    batches = list(lg.batches())
    assert [r.value for b in batches for r in b.records()] == lines
    assert all(b.size <= 3000 for b in batches) and len(batches) > 15
    before = [b"a%d" % i for i in range(5)]
    big = base64.b64encode(rnd.randbytes(4000))
    data = b"".join(x + b"\n" for x in [*before, big, b"after"])
    assert LineWriter(batch_size=60000).write(lg, data) == sum(len(x) + 1 for x in before)
    values = [r.value for r in lg.records()]
    assert values == lines + before
    with pytest.raises(RecordTooLargeError):
        LineWriter(batch_size=60000).write(lg, big + b"\n")
    assert [r.value for r in lg.records()] == lines + before
    lg.close()
