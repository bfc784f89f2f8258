#!/usr/bin/env bash
# The test command: the whole suite against real servers, kernels and adapters, with the
# project virtualenv that scripts/install.sh made (its bin first on PATH: node, tsserver, deno).
# Skips name the missing component in the summary (-ra); pytest's "no tests" (exit 5) fails.
# TETHER_TEST_WORKERS=0 runs it in one process (pytest-xdist's -n 0).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=python3
if [ -x .venv/bin/python ]; then
  PY=$PWD/.venv/bin/python
  export PATH="$PWD/.venv/bin:$PATH"
fi
# three workers, a test module each at a time (a module's shared runtime stays in one
# worker): a test waits on servers, kernels and adapters starting, so on 2 cores two
# workers left the machine 15% idle (busy 84-85% of 580-588 s, measured from /proc/stat);
# three keep it 94-96% busy and take 522-547 s for the same ~1000 CPU-seconds. The
# modules go longest first (tests/module_order.py, from tests/module_seconds.json), not
# xdist's most-tests-first, which left the one-test demo module for last on one core.
"$PY" -m pytest -ra -q -p no:cacheprovider -n "${TETHER_TEST_WORKERS:-3}" --dist loadfile \
  --no-loadscope-reorder "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
