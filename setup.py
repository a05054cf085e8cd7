"""Builds the optional C extension kafkafs.record._speedups (everything else is in
pyproject.toml). The extension is optional: when it does not compile, the install still
succeeds and kafkafs.record.fast uses its pure-Python twins.

With Intel's ISA-L installed (Debian: libisal-dev), the extension also gets
``render_file_values`` (read, CRC-32C check and render of plain batches without the GIL,
the ``messages`` read path), with ISA-L's ``crc32_iscsi`` as the CRC-32C. Without it that
one function is absent and the views render through the general path. (``records.jsonl``'s
``jsonl_render_file``, kafkafs/record/_jsonl.c, is built either way: without ISA-L the
CRC-32C, kafkafs/record/_crc32c.c, is SSE4.2's or a table's.)
"""

import os
import subprocess

from setuptools import Extension, setup


def _isal() -> dict:
    """Compiler options for ISA-L when its header and library are present, else {}."""
    try:
        found = subprocess.run(["pkg-config", "--exists", "libisal"], check=False).returncode == 0
    except OSError:
        found = False
    found = found or os.path.exists("/usr/include/isa-l/crc.h")
    if not found or os.environ.get("KAFKAFS_NO_ISAL", "") not in ("", "0"):
        return {}
    return {"define_macros": [("KAFKAFS_HAVE_ISAL", "1")], "libraries": ["isal"]}


# one extension, one source file per pure-Python twin, all sharing _speedups.h (which lists
# what each holds); the Python side imports kafkafs.record._speedups as before
SOURCES = ["kafkafs/record/" + name for name in (
    "_speedups.c",    # the module: PyInit__speedups, the record errors
    "_crc32c.c",      # CRC-32C: ISA-L, SSE4.2 or a table
    "_fast.c",        # kafkafs.record.fast
    "_plain.c",       # kafkafs.record.plain
    "_compaction.c",  # kafkafs.record.compaction
    "_columnar.c",    # kafkafs.record.columnar
    "_jsonl.c",       # kafkafs.record.jsonl
)]

setup(ext_modules=[Extension("kafkafs.record._speedups", SOURCES,
                             depends=["kafkafs/record/_speedups.h"], optional=True,
                             **_isal())])
