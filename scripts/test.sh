#!/usr/bin/env bash
# README command (b): install what is needed, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
exec .venv/bin/python -m pytest -q -ra "$@"
