# Two entry points: `make demo` and `make test` (ruff, mypy, the documentation site, then the tests; `make check`
# is the same). `make docs` builds the site alone (mkdocs build --strict: a broken link or page fails it).
# Both create the virtual environment on first use. `make results` regenerates the tables of docs/results.md
# from experiments/results/ (no simulation); `make experiments` deletes result files not made by the code
# checked out now, re-runs every experiment with its documented arguments (hours), then does `make results`.
# The experiments read the measured data from $DLSCHED_DATA.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TIMED := $(PY) experiments/timed.py -- $(PY)
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: demo test check lint typecheck docs bench clean results experiments

WORKERS ?= 2

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,runtime,service,docs]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dlsched compare

lint: $(STAMP)
	$(VENV)/bin/ruff check $(wildcard src tests scripts benchmarks experiments examples)

typecheck: $(STAMP)
	$(VENV)/bin/mypy

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Tests that start Ray share one xdist group (one worker, one after another). The whole run is interrupted
# after 45 minutes so that a hang still ends with pytest's summary of what failed.
test: lint typecheck docs
	timeout -s INT -k 120 2700 $(PY) -m pytest -n 2 --dist loadgroup --durations=25

check: test

bench: $(STAMP)
	$(PY) benchmarks/sim_speed.py

results: $(STAMP)
	$(PY) experiments/make_results.py

# Order matters: sia_fairness and sia_sensitivity reuse runs sia_table33 cached under the same commit.
# each through experiments/timed.py: it says how long each took (experiments/results/experiment_times.jsonl)
experiments: $(STAMP)
	$(PY) experiments/make_results.py --purge-stale
	$(TIMED) experiments/pal_testbed.py --seeds 4 --variability medians,episodes,runs --workers $(WORKERS)
	$(TIMED) benchmarks/placement_time.py --rounds 20 --out experiments/results/placement_time.json
	$(TIMED) experiments/pal_fig11.py --seeds 2 --variability medians,episodes,runs --workers $(WORKERS)
	$(TIMED) experiments/pal_fig13.py --seeds 1 --penalties 1.0,2.0,3.0 --variability medians,episodes,runs \
		--workers $(WORKERS)
	$(TIMED) experiments/pal_synergy.py --workers $(WORKERS)
	$(TIMED) experiments/pal_synergy.py --rates 18,22,26 --placements packed-sticky,pm-first,pal --series-rates 22 \
		--tag _saturated --workers $(WORKERS)
	$(TIMED) experiments/sia_table34.py --workloads 2 --policies sia pollux shockwave themis gavel --workers $(WORKERS)
	$(TIMED) experiments/sia_table33.py --workloads 2 --saturn 4 --workers $(WORKERS)
	$(TIMED) experiments/sia_restart_counts.py --workloads 2 --saturn 4
	$(TIMED) experiments/sia_fairness.py --workloads 2 --saturn 4 --policies sia,pollux,gavel,themis --workers $(WORKERS)
	$(TIMED) experiments/sia_table32.py --seeds 1 --workers $(WORKERS)
	$(TIMED) experiments/sia_sensitivity.py --workloads 1 --workers $(WORKERS)
	$(TIMED) experiments/sia_rigid.py --workloads 3 --workers $(WORKERS)
	$(TIMED) experiments/sia_gpt.py --workloads 3 --workers $(WORKERS)
	$(TIMED) experiments/gavel_fidelity.py --workloads 2 --workers $(WORKERS)
	$(TIMED) experiments/gimbal_e2e.py --seeds 5 --workers $(WORKERS)
	$(TIMED) experiments/gimbal_search.py
	$(TIMED) experiments/gimbal_ablation.py --seeds 5 --workers $(WORKERS)
	$(TIMED) experiments/hops_estimator.py --workloads 3 --workers $(WORKERS)
	$(TIMED) experiments/hops_estimator_error.py --seeds 5
	$(TIMED) experiments/hops_table3.py --seeds 5 --workers $(WORKERS)
	$(TIMED) experiments/hops_table4.py --seeds 5 --ablation-seeds 1 --workers $(WORKERS)
	$(TIMED) experiments/hops_ftf.py --seeds 5 --workers $(WORKERS)
	$(TIMED) experiments/hops_priority.py --cluster hops-64 --jobs 40 --rates 38,150 --seeds 5 --workers $(WORKERS)
	$(TIMED) benchmarks/coordination_time.py --rounds 20 --out experiments/results/coordination_time.json
	$(TIMED) experiments/copter_table41.py --cluster copter-10k --jobs 5000 --hours 3 --json experiments/results/copter_table41_10k.json --workers $(WORKERS)
	$(TIMED) experiments/copter_table41.py --cluster copter-25k --jobs 4167 --hours 1 --json experiments/results/copter_table41_25k.json --workers $(WORKERS)
	$(TIMED) benchmarks/copter_attribution.py --gpus 10240 --rounds 10 --out experiments/results/copter_attribution.json
	$(PY) experiments/make_results.py

clean:
	rm -rf $(VENV) dlsched-compare .pytest_cache .mypy_cache site
