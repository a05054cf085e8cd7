"""The mount's ``-o`` options: which ones kafkafs interprets itself and which go to FUSE.
A module of its own, free of pyfuse3 and trio, so ``mount.fuse.kafkafs`` shares the list."""

from __future__ import annotations

import os

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


# libfuse 3's mount and session options (lib/mount.c fuse_mount_opts, lib/fuse_lowlevel.c
# fuse_ll_opts), as libfuse 3.14 accepts them: it refuses diratime, nodiratime, lazytime,
# relatime, strictatime and their negations (later versions know some), nonempty (libfuse 2),
# and the kernel's own fd, rootmode, user_id, group_id (libfuse sets those itself)
FUSE_OPTIONS = frozenset({
    "allow_other", "allow_root", "auto_unmount", "blkdev", "default_permissions", "debug",
    "ro", "rw", "suid", "nosuid", "dev", "nodev", "exec", "noexec", "async", "sync",
    "dirsync", "atime", "noatime",
})
FUSE_VALUE_OPTIONS = frozenset({
    "fsname", "subtype", "max_read", "blksize", "context", "fscontext", "defcontext",
    "rootcontext", "user",
})
# libfuse takes these, but a kafkafs mount cannot have them: why
REFUSED_FUSE_OPTIONS = {
    "blkdev": "blkdev is for file systems on a block device (type fuseblk); kafkafs is none",
    "blksize": "blksize is for file systems on a block device (type fuseblk, with blkdev); "
               "the kernel refuses it for kafkafs",
    "nonempty": "nonempty is a libfuse 2 option: libfuse 3 mounts over a non-empty directory "
                "anyway, and refuses the word",
}
SELINUX_OPTIONS = ("context", "fscontext", "defcontext", "rootcontext")


def check_fuse_options(fuse: set[str], *, uid: int | None = None,
                       fuse_conf: str = "/etc/fuse.conf",
                       selinux: str = "/sys/fs/selinux") -> None:
    """Refuse, before anything is mounted or written, a FUSE option libfuse 3 or the kernel
    would refuse inside ``pyfuse3.init`` (after the log dirs were loaded): one libfuse 3.14
    does not know (:data:`FUSE_OPTIONS`, :data:`FUSE_VALUE_OPTIONS`: a value where none is
    taken, or none where one is, counts too), one a kafkafs mount cannot have
    (:data:`REFUSED_FUSE_OPTIONS`), an SELinux context without SELinux, and for a user other
    than root (``uid``, default the effective one) ``allow_other``/``allow_root`` without
    ``user_allow_other`` in ``fuse_conf`` (fusermount3 refuses them). Raises ValueError
    naming the option."""
    for item in sorted(fuse):
        name, eq, _value = item.partition("=")
        if name in REFUSED_FUSE_OPTIONS:
            raise ValueError(f"FUSE option {item!r}: {REFUSED_FUSE_OPTIONS[name]}")
        if name in SELINUX_OPTIONS and not os.path.isdir(selinux):
            raise ValueError(f"FUSE option {item!r}: an SELinux context, and SELinux is not "
                             "enabled here (the kernel refuses it)")
        if (name in FUSE_OPTIONS and not eq) or (name in FUSE_VALUE_OPTIONS and eq):
            continue
        if name in FUSE_OPTIONS or name in FUSE_VALUE_OPTIONS:
            shape = f"{name}=VALUE" if name in FUSE_VALUE_OPTIONS else f"{name} (no value)"
            raise ValueError(f"FUSE option {item!r}: libfuse 3 takes it as {shape}")
        usable = sorted(n for n in FUSE_OPTIONS - OWN_OPTIONS if n not in REFUSED_FUSE_OPTIONS)
        usable += sorted(f"{n}=" for n in FUSE_VALUE_OPTIONS
                         if n not in REFUSED_FUSE_OPTIONS and n != "max_read")
        raise ValueError(f"unknown mount option {item!r}: neither kafkafs's "
                         f"({', '.join(sorted(OWN_OPTIONS))}) nor libfuse 3's "
                         f"({', '.join(usable)})")
    uid = os.geteuid() if uid is None else uid
    wants = sorted(fuse & {"allow_other", "allow_root"})
    if uid != 0 and wants and not _user_allow_other(fuse_conf):
        raise ValueError(f"FUSE option {wants[0]!r}: only root may use it unless "
                         f"{fuse_conf} has user_allow_other (fusermount3 refuses it)")


def _user_allow_other(fuse_conf: str) -> bool:
    try:
        with open(fuse_conf, encoding="utf-8", errors="replace") as f:
            return any(line.split("#", 1)[0].strip() == "user_allow_other" for line in f)
    except OSError:
        return False


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
