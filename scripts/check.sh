#!/usr/bin/env bash
# Sets up the dev environment, then runs every check CI runs:
# ruff format --check, ruff check, mypy --strict, lint-imports (layers), pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,spark,conformance
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff format --check"; ruff format --check src tests benchmarks
echo "== ruff check";          ruff check src tests benchmarks
echo "== mypy --strict";       mypy
echo "== lint-imports";        lint-imports
echo "== pytest";              python -m pytest "$@"
