#!/usr/bin/env bash
# The test command: the whole suite against real servers, kernels and adapters, with the
# project virtualenv that scripts/install.sh made (its bin first on PATH: node, tsserver, deno).
# Skips name the missing component in the summary (-ra); pytest's "no tests" (exit 5) fails.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=python3
if [ -x .venv/bin/python ]; then
  PY=$PWD/.venv/bin/python
  export PATH="$PWD/.venv/bin:$PATH"
fi
"$PY" -m pytest -ra -q -p no:cacheprovider "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
