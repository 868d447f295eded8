#!/usr/bin/env bash
# The benchmark suite.  Each script prints one JSON line per result; they are
# appended to $BENCH_OUT (var/bench-results.jsonl) and plotted into $BENCH_PLOTS
# (docs/bench/*.png) at the end.  Corpora are built under $BENCH_DIR (var/bench)
# on first use and reused afterwards (delete the directory to rebuild them).
#
#   bench/run.sh           default sizes: 10 and 160 MB roots (the larger one holds
#                          over 1,000,000 events for the search figures), a 100 MB single log,
#                          appends at 1 and 100 MB; about ten minutes on 2 cores
#   FULL=1 bench/run.sh    also the 1 GB root, the 1 GB single log, appends and
#                          window reads at 1 GB (about 30 more minutes)
#   TINY=1 bench/run.sh    a few hundred KB of logs, every script once (the smoke test)
#
# Other knobs: APPENDS (default 200), LIVE_APPENDS (100), READERS (8), READERS_SECONDS (60), the
# sizes below (ROOTS, SINGLES, APPEND_MB, WINDOW_MB, EXPORT_MB, LISTING_MB, ...),
# PYTHON (default: .venv/bin/python, after scripts/bootstrap), BENCH_RUN_ID.
# LISTING_MB must be one of ROOTS (its index is the one the build leaves), and
# SINGLES' first size serves the window, export and long-log search figures.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  scripts/bootstrap
  PYTHON=.venv/bin/python
fi
DIR=${BENCH_DIR:-var/bench}
OUT=${BENCH_OUT:-var/bench-results.jsonl}
PLOTS=${BENCH_PLOTS:-docs/bench}
export BENCH_RUN_ID=${BENCH_RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$DIR" "$(dirname "$OUT")"

# Sizes in MB (each may be overridden from the environment, e.g. ROOTS="10 30").
if [ "${TINY:-0}" = 1 ]; then
  : "${ROOTS:=0.3 0.6}" "${SINGLES:=0.3}" "${APPEND_MB:=0.3}" "${WINDOW_MB:=0.3}" "${EXPORT_MB:=0.3}"
  : "${LISTING_MB:=0.6}" "${LISTING_MIN:=0}" "${READERS_BASE:=0.3}"
  : "${APPENDS:=10}" "${READERS:=2}" "${READERS_SECONDS:=3}"
  : "${SEARCH_REPEAT:=1}" "${WINDOW_REPEAT:=20}" "${LISTING_REPEAT:=5}"
  : "${LIVE_APPENDS:=5}" "${LIVE_EVENTS:=50}" "${LIVE_SESSIONS:=5}"
else
  if [ "${FULL:-0}" = 1 ]; then
    : "${ROOTS:=10 160 1000}" "${SINGLES:=100 1000}" "${APPEND_MB:=1 100 1000}" "${WINDOW_MB:=100 1000}"
  fi
  : "${ROOTS:=10 160}" "${SINGLES:=100}" "${APPEND_MB:=1 100}" "${WINDOW_MB:=100}" "${EXPORT_MB:=100}"
  : "${LISTING_MB:=160}" "${LISTING_MIN:=10000}" "${READERS_BASE:=10}"
  : "${APPENDS:=200}" "${READERS:=8}" "${READERS_SECONDS:=60}"
  : "${SEARCH_REPEAT:=2}" "${WINDOW_REPEAT:=200}" "${LISTING_REPEAT:=50}"
  : "${LIVE_APPENDS:=100}" "${LIVE_EVENTS:=500}" "${LIVE_SESSIONS:=50}"
fi
: "${SEARCH_ROOT:=$LISTING_MB}"   # search runs on the listing's index (>= 10,000 sessions)
LONG=${SINGLES%% *}

run() {
  echo "== $*" >&2
  local started=$SECONDS
  "$PYTHON" -m "$@" | tee -a "$OUT"
  echo "   (${*%% *}: $((SECONDS - started)) s)" >&2
}

run bench.common                                   # the machine
# shellcheck disable=SC2086
run bench.build --dir "$DIR" --sizes $ROOTS --single-sizes $SINGLES
run bench.decode "$DIR/corpus-$SEARCH_ROOT/root" --mode both --repeat 3   # best of 3: a noisy VM
run bench.search "$DIR/corpus-$SEARCH_ROOT/index.db" --events-db "$DIR/single-$LONG/index.db" --repeat "$SEARCH_REPEAT"
run bench.search_modes "$DIR/corpus-$SEARCH_ROOT/index.db" --repeat "$SEARCH_REPEAT"   # phrase/words/substring x scopes
run bench.browse "$DIR/corpus-$SEARCH_ROOT/index.db"      # sessionq browse: per-keystroke latency in the app
run bench.listing --dir "$DIR/corpus-$LISTING_MB" --mb "$LISTING_MB" --min-sessions "$LISTING_MIN" --repeat "$LISTING_REPEAT"
for mb in $WINDOW_MB; do
  run bench.window --dir "$DIR" --mb "$mb" --repeat "$WINDOW_REPEAT"
done
run bench.export --dir "$DIR" --mb "$EXPORT_MB"
# shellcheck disable=SC2046
run bench.append --dir "$DIR" $(for mb in $APPEND_MB; do printf -- '--mb %s ' "$mb"; done) --appends "$APPENDS"
run bench.live --appends "$LIVE_APPENDS" --events "$LIVE_EVENTS" --sessions "$LIVE_SESSIONS"   # appended → visible in an open page (Chromium; skipped without it)
run bench.readers --dir "$DIR" --base-mb "$READERS_BASE" --readers "$READERS" --duration "$READERS_SECONDS"
"$PYTHON" -m bench.plots --results "$OUT" --out "$PLOTS" --run "$BENCH_RUN_ID"
echo "results: $OUT (run $BENCH_RUN_ID); plots: $PLOTS" >&2
