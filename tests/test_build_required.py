"""The C extension is built where the suite requires it.

setup.py builds ``kafkafs.record._speedups`` as an optional extension: a machine without a
compiler still installs kafkafs, on its pure-Python paths. The tests of the C side then
skip, so a build that failed (a compile error in one of its files drops the whole module)
would pass unnoticed. ``scripts/test.sh`` (README's test command, CI) sets
``KAFKAFS_REQUIRE_SPEEDUPS=1``: there a missing extension fails here, naming the fix."""

from __future__ import annotations

import importlib
import os

import pytest


def test_the_c_extension_is_built_when_required():
    try:
        importlib.import_module("kafkafs.record._speedups")
    except ImportError as exc:
        if os.environ.get("KAFKAFS_REQUIRE_SPEEDUPS") == "1":
            pytest.fail(f"kafkafs.record._speedups is not built ({exc}): setup.py's optional "
                        "build dropped it; run `.venv/bin/pip install -e .` and read the "
                        "compiler's errors")
        pytest.skip(f"the C extension is not built: {exc}")
