# Benchmarks (see README "Benchmarks" and bench/run.sh).  Tests: scripts/test.
.PHONY: bench bench-full bench-tiny bench-plots

bench:        ## the default suite (about ten minutes on 2 cores)
	bench/run.sh

bench-full:   ## also the 1 GB sizes
	FULL=1 bench/run.sh

bench-tiny:   ## every benchmark once on a few hundred KB (what the smoke test runs)
	TINY=1 BENCH_DIR=var/bench-tiny BENCH_OUT=var/bench-tiny-results.jsonl BENCH_PLOTS=var/bench-tiny-plots bench/run.sh

bench-plots:  ## re-draw docs/bench/*.png from var/bench-results.jsonl (every run, latest point wins)
	.venv/bin/python -m bench.plots
