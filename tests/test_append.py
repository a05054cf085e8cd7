"""Writing ``append`` from the shell (kafkafs.fs.append): a line that is refused — longer
than one batch of ``max.message.bytes``, without ``key.separator`` under ``parse.key`` —
fails the ``write`` that carries it (or, for a writer that ignores short counts, its
``close``), never a command that exits 0 with the line gone, and nothing of it is stored;
the lines before it are, with a short count saying exactly which."""

from __future__ import annotations

import errno
import os

import pytest
from conftest import sh


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
