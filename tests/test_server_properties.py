"""daemon/server.properties: every key kafkafs honours is there, with Kafka's default.

The file is what packaging installs as /etc/kafkafs/server.properties. Kafka keys appear
either set (``key=value``) or as a commented default (``#key=value``; an empty value means
Kafka's default is null). The tests parse it with a small Java-properties reader of their
own, so they do not depend on the parser under test elsewhere.
"""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROPS = os.path.join(ROOT, "daemon", "server.properties")

LONG_MAX = str((1 << 63) - 1)

# Broker keys kafkafs honours -> Kafka's default as written in the file ("" = null).
BROKER_DEFAULTS = {
    "log.dirs": "",
    "log.dir": "/tmp/kafka-logs",
    "num.partitions": "1",
    "log.segment.bytes": "1073741824",
    "log.roll.ms": "",
    "log.roll.hours": "168",
    "log.roll.jitter.ms": "",
    "log.roll.jitter.hours": "0",
    "log.index.size.max.bytes": "10485760",
    "log.index.interval.bytes": "4096",
    "log.retention.ms": "",
    "log.retention.minutes": "",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "producer.id.expiration.ms": "86400000",
    "producer.id.expiration.check.interval.ms": "600000",
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": "",
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.flush.start.offset.checkpoint.interval.ms": "60000",
    "log.segment.delete.delay.ms": "60000",
    "message.max.bytes": "1048588",
    "log.message.timestamp.type": "CreateTime",
    "compression.type": "producer",
    "log.cleanup.policy": "delete",
    "log.cleaner.enable": "true",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.dedupe.buffer.size": "134217728",
    "log.cleaner.threads": "1",
    "log.cleaner.io.buffer.size": "524288",
    "log.cleaner.io.buffer.load.factor": "0.9",
    "log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": LONG_MAX,
    "log.preallocate": "false",
    "num.recovery.threads.per.data.dir": "1",
    "auto.create.topics.enable": "true",
    "node.id": "-1",
    "broker.id": "-1",
    "log.message.timestamp.before.max.ms": LONG_MAX,
    "log.message.timestamp.after.max.ms": "3600000",
    "listeners": "",
    "advertised.listeners": "",
    "socket.request.max.bytes": "104857600",
    "queued.max.requests": "500",
    "num.io.threads": "1",  # (Kafka's is 8 threads; kafkafs has one event loop, see the file)
    "connections.max.idle.ms": "600000",
    "fetch.max.bytes": "57671680",
    "max.incremental.fetch.session.cache.slots": "1000",
    "offsets.topic.num.partitions": "50",
    "transaction.state.log.num.partitions": "50",
    "transaction.max.timeout.ms": "900000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transactional.id.expiration.ms": "604800000",
    "transactions.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "offsets.retention.minutes": "10080",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
}

# Keys the file sets to something other than Kafka's default, and to what.
SET_VALUES = {
    "log.dirs": "/var/lib/kafkafs/logs",
    "kafkafs.mount.point": "/srv/kafkafs",
    "kafkafs.mount.options": "",
}

# Topic-level override names (Kafka's TopicConfig) -> the broker key they override.
TOPIC_SYNONYMS = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "compression.type": "compression.type",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "preallocate": "log.preallocate",
}


# -- a small Java-properties reader ------------------------------------------------------

def _logical_lines(text: str):
    """Yield (line_number, logical line) with backslash continuations joined and leading
    whitespace stripped, as java.util.Properties.load does."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip()
        i += 1
        if line.startswith(("#", "!")):
            yield start + 1, line
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        yield start + 1, line


def _split(line: str) -> tuple[str, str]:
    """Split ``key<sep>value``: the key ends at an unescaped '=', ':' or whitespace; the
    separator may be surrounded by whitespace."""
    key = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            key.append(line[i + 1])
            i += 2
            continue
        if c in "=: \t\f":
            break
        key.append(c)
        i += 1
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return "".join(key), rest


def parse(text: str):
    """Return (active, commented): dicts key -> (value, line number). ``commented`` holds
    commented-out assignments ``#key=value`` (no space after '#': prose comments that
    happen to contain '=' are not assignments)."""
    active: dict[str, tuple[str, int]] = {}
    commented: dict[str, tuple[str, int]] = {}
    for no, line in _logical_lines(text):
        if not line:
            continue
        if line[0] in "#!":
            m = re.match(r"^#([a-z][a-z0-9]*(?:\.[a-z0-9]+)*)=(.*)$", line)
            if m:
                assert m.group(1) not in commented, f"line {no}: {m.group(1)} commented twice"
                commented[m.group(1)] = (m.group(2).strip(), no)
            continue
        key, value = _split(line)
        assert key not in active, f"line {no}: {key} set twice"
        active[key] = (value, no)
    return active, commented


@pytest.fixture(scope="module")
def props():
    with open(PROPS, encoding="utf-8") as f:
        text = f.read()
    active, commented = parse(text)
    return text, active, commented


def test_parser_handles_java_syntax():
    active, commented = parse(
        "# prose with a = sign\n"
        "a.b=1\n"
        "c.d : two words\n"
        "e.f   3\n"
        "g.h=long \\\n    value\n"
        "#i.j=9\n"
        "# k.l=not an assignment\n"
        "! m.n=neither\n"
        "o\\=p.q=5\n")
    assert {k: v for k, (v, _) in active.items()} == {
        "a.b": "1", "c.d": "two words", "e.f": "3", "g.h": "long value", "o=p.q": "5"}
    assert {k: v for k, (v, _) in commented.items()} == {"i.j": "9"}


def test_every_broker_key_is_present(props):
    _text, active, commented = props
    missing = [k for k in BROKER_DEFAULTS if k not in active and k not in commented]
    assert not missing, f"keys missing from daemon/server.properties: {missing}"


def test_no_key_both_set_and_commented(props):
    _text, active, commented = props
    assert not set(active) & set(commented)


def test_commented_defaults_are_kafkas(props):
    _text, _active, commented = props
    wrong = {k: (commented[k][0], want) for k, want in BROKER_DEFAULTS.items()
             if k in commented and commented[k][0] != want}
    assert not wrong, f"commented default differs from Kafka's (file, Kafka): {wrong}"


def test_each_key_documents_its_default(props):
    """The comment block right above every assignment says ``Default: ...``."""
    text, active, commented = props
    lines = text.splitlines()
    for key, (_value, no) in {**active, **commented}.items():
        block = []
        i = no - 2
        while i >= 0 and lines[i].startswith("#") and not re.match(r"^#\S+=", lines[i]):
            block.append(lines[i])
            i -= 1
        block_text = "\n".join(block)
        assert "Default:" in block_text, f"{key} (line {no}) has no 'Default:' line above it"
        assert f"# {key}" in block_text, f"{key} (line {no}) is not named in its comment"


def test_set_values(props):
    _text, active, _commented = props
    for key, want in SET_VALUES.items():
        assert key in active, f"{key} must be set"
        assert active[key][0] == want


def test_only_kafkafs_keys_are_prefixed(props):
    _text, active, commented = props
    keys = set(active) | set(commented)
    own = {k for k in keys if k.startswith("kafkafs.")}
    assert own == {"kafkafs.mount.point", "kafkafs.mount.options", "kafkafs.batch.size",
                   "kafkafs.max.open.files", "kafkafs.max.partitions.per.topic",
                   "kafkafs.cache.max.bytes"}
    assert keys - own <= set(BROKER_DEFAULTS), \
        f"unknown keys in the file: {sorted(keys - own - set(BROKER_DEFAULTS))}"


def test_topic_override_names_are_documented(props):
    text, active, commented = props
    section = text.split("Topic-level overrides", 1)
    assert len(section) == 2, "the topic-level override section is missing"
    rows = {}
    for line in section[1].splitlines():
        m = re.match(r"^#\s+([a-z][a-z.]+)\s+(log\.\S+|message\.max\.bytes|compression\.type)",
                     line)
        if m:
            rows[m.group(1)] = m.group(2)
    for topic_key, broker_key in TOPIC_SYNONYMS.items():
        assert topic_key in rows, f"topic config {topic_key} not listed"
        assert rows[topic_key] == broker_key, (topic_key, rows[topic_key])
    # topic names are documentation only: none may be set in a broker config
    assert not (set(TOPIC_SYNONYMS) - {"compression.type"}) & (set(active) | set(commented))


def test_agrees_with_kafkafs_config():
    """Cross-check with the config module: the file names exactly the keys it reads, and
    the commented defaults, uncommented, give its defaults."""
    try:
        from kafkafs.log import config as cfg
    except ImportError as exc:  # the package itself is broken: other tests report that
        pytest.skip(f"kafkafs.log.config not importable: {exc}")
    with open(PROPS, encoding="utf-8") as f:
        active, commented = parse(f.read())
    known = set(cfg._BROKER_KEYS) | {b for b, _t, _u in cfg._SYNONYMS} | set(cfg._KAFKAFS_KEYS)
    in_file = set(active) | set(commented)
    assert known - in_file == set(), f"keys kafkafs reads but the file omits: {known - in_file}"
    assert in_file - known == set(), f"keys in the file kafkafs does not read: {in_file - known}"

    everything = {k: v for k, (v, _n) in commented.items() if v != ""}
    everything.update({k: v for k, (v, _n) in active.items()})
    loaded = cfg.BrokerConfig.from_properties(everything)
    default = cfg.BrokerConfig()
    assert loaded.log == default.log
    assert loaded.log_dirs == ("/var/lib/kafkafs/logs",)
    assert loaded.mount_point == "/srv/kafkafs"
    assert loaded.mount_options == ()
    for attr in ("num_partitions", "log_retention_check_interval_ms",
                 "producer_id_expiration_ms", "producer_id_expiration_check_interval_ms",
                 "log_flush_scheduler_interval_ms", "log_flush_offset_checkpoint_interval_ms",
                 "log_flush_start_offset_checkpoint_interval_ms", "log_cleaner_enable",
                 "log_cleaner_backoff_ms", "log_cleaner_dedupe_buffer_size",
                 "num_recovery_threads_per_data_dir", "auto_create_topics_enable", "node_id",
                 "kafkafs_max_open_files", "kafkafs_max_partitions_per_topic"):
        assert getattr(loaded, attr) == getattr(default, attr), attr
    assert dict(loaded.extra) == {}
