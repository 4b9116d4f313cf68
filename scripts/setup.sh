#!/usr/bin/env bash
# Creates .venv and installs rocketstore with the given extras (default: none).
# Usage: scripts/setup.sh [dev|spark|dev,spark]
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
if ! python3 -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  echo "rocketstore needs Python >= 3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if [ -n "$extras" ]; then
  .venv/bin/python -m pip install -q -e ".[${extras}]"
else
  .venv/bin/python -m pip install -q -e .
fi
# The official 5.x Python client for the gRPC tests: its import name clashes with the 4.x
# C++-core client's, so it gets a venv of its own (tests/conformance/conftest.py uses it).
requirements=tests/conformance/py5/requirements.txt
if [[ ",$extras," == *",conformance,"* ]] \
    && ! cmp -s "$requirements" .venv-rmq5/.installed 2>/dev/null; then
  python3 -m venv .venv-rmq5
  .venv-rmq5/bin/python -m pip install -q -r "$requirements"
  cp "$requirements" .venv-rmq5/.installed
fi
