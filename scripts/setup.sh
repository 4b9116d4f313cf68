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
