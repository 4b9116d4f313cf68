#!/usr/bin/env bash
# Sets up the dev environment, then runs every check CI runs:
# ruff format --check, ruff check, mypy --strict, lint-imports (layers), pytest, and the
# benchmark suite's --quick smoke run (tiny sizes, no timing checks: the scripts still run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/system-deps.sh
scripts/setup.sh dev,spark,bench,conformance
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff format --check"; ruff format --check src tests benchmarks
echo "== ruff check";          ruff check src tests benchmarks
echo "== mypy --strict";       mypy
echo "== lint-imports";        lint-imports
echo "== pytest";              python -m pytest "$@"
echo "== benchmarks --quick";  python -m benchmarks run --quick --out "$(mktemp -d)" >/dev/null
