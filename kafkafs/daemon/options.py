"""The mount's ``-o`` options: which ones kafkafs interprets itself and which go to FUSE.
A module of its own, free of pyfuse3 and trio, so ``mount.fuse.kafkafs`` shares the list."""

from __future__ import annotations

from ..log.config import LogConfig
from ..log.errors import InvalidConfigError

# the topic config (and broker key) that batch.size defaults to when a writer gives none
BATCH_SIZE_KEY = "kafkafs.batch.size"

# -o options kafkafs interprets itself; everything else goes to FUSE
OWN_OPTIONS = {"parse.key", "key.separator", "read_only", "ro", "rw", "isolation.level",
               "read_ahead_kb", "batch.size", "list_all"}


def parse_batch_size(value: str) -> int:
    """A producer's ``batch.size`` (bytes), checked as the topic config
    ``kafkafs.batch.size`` is (Kafka's ProducerConfig: INT, at least 0). Raises ValueError
    in Kafka's ConfigException words: ``Invalid value x for configuration batch.size: Not a
    number of type INT``."""
    try:
        return LogConfig().with_overrides({BATCH_SIZE_KEY: value}).kafkafs_batch_size
    except InvalidConfigError as exc:
        raise ValueError(str(exc).replace(f"configuration {BATCH_SIZE_KEY}:",
                                          "configuration batch.size:")) from None


def batch_size_option(own: dict[str, str]) -> int | None:
    """The ``batch.size`` option (bytes), None when not given. Raises ValueError."""
    return None if "batch.size" not in own else parse_batch_size(own["batch.size"])


def split_options(options: list[str]) -> tuple[dict[str, str], set[str]]:
    """Split ``-o`` values (each may be comma-separated) into kafkafs's own options
    (``name -> value``) and FUSE options. ``allow_other`` adds ``default_permissions`` so the
    kernel enforces the modes kafkafs reports. Raises ValueError for ``max_read``."""
    own: dict[str, str] = {}
    fuse: set[str] = set()
    for opt in options:
        for item in opt.split(","):
            if not item.strip():
                continue
            name, _, value = item.partition("=")
            name = name.strip()  # the value is kept whole: key.separator=" | " ends in a space
            if name in OWN_OPTIONS:
                own[name] = value
            elif name == "max_read":
                # libfuse wants init() to ask for the same size, which pyfuse3 cannot: the
                # mount would come up and die at the kernel's INIT
                raise ValueError("max_read is not supported by kafkafs (pyfuse3 cannot "
                                 "negotiate it); read_ahead_kb sets how far the kernel reads ahead")
            else:
                fuse.add(item.strip())
    if "allow_other" in fuse:
        fuse.add("default_permissions")
    return own, fuse
