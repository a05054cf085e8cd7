#!/usr/bin/env bash
# README command (b): install what is needed, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
# the C extension is built optionally (setup.py): here its absence is a failure, not skips
export KAFKAFS_REQUIRE_SPEEDUPS=1
# two workers (pytest-xdist), a test file per worker at a time: the slow files (Spark
# clusters, crash loops, kafka-python's suite) share nothing and run side by side
exec .venv/bin/python -m pytest -q -ra -n 2 --dist loadfile "$@"
