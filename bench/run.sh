#!/usr/bin/env bash
# The benchmark suite at the default size (about ten minutes on a 2-core machine):
# builds corpora under var/ (reused when present) and appends one JSON line per
# result to var/bench-results.jsonl.  FULL=1 also runs the 1 GB sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap
PY=.venv/bin/python
OUT=var/bench-results.jsonl
mkdir -p var
run() { "$@" | tee -a "$OUT"; }
[ -d var/bench-100/root ] || $PY -m bench.corpus root var/bench-100/root --mb 100 >&2
[ -d var/bench-160/root ] || $PY -m bench.corpus root var/bench-160/root --mb 160 >&2
run $PY -m bench.decode var/bench-100/root --repeat 2
rm -f var/bench-100/index.db*
run $PY -m bench.build var/bench-100/root --db var/bench-100/index.db
[ -f var/bench-160/index.db ] || run $PY -m bench.build var/bench-160/root --db var/bench-160/index.db
run $PY -m bench.search var/bench-160/index.db --repeat 2
run $PY -m bench.listing --dir var/bench-160
run $PY -m bench.append --mb 1 --mb 100 --appends "${APPENDS:-100}"
if [ "${FULL:-0}" = 1 ]; then
  [ -d var/bench-1000/root ] || $PY -m bench.corpus root var/bench-1000/root --mb 1000 >&2
  run $PY -m bench.build var/bench-1000/root --db var/bench-1000/index.db
  run $PY -m bench.append --mb 1000 --appends "${APPENDS:-100}"
fi
