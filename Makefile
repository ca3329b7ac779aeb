# `make run` sets up .venv and materializes the whole graph on data/documents.csv (quietly, with a
# summary at the end; `dagster asset materialize` prints Dagster's full log).
# `make test` runs the fast tier (minutes); `make test-all` installs every extra and runs the whole
# suite, as CI does.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet
export DAGSTER_HOME := $(CURDIR)/.dagster_home
# pytest's workers: the fast tier's tests are independent, and two fill this machine's two cores
WORKERS ?= 2
# everything but the tiers that need an extra, a cluster, a browser or long runs
FAST := not slow and not ray and not browser and not faults and not bench

.PHONY: setup setup-ray setup-bench setup-all run dev test test-all bench bench-smoke clean

# the pipeline, the UI and the fast test tier; Ray, the browser driver and the peers are extras
setup: $(VENV)/.installed $(VENV)/.warm $(DAGSTER_HOME)/dagster.yaml

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e ".[dev]"
	rm -f $(VENV)/.extra-*
	touch $@

# one stamp per extra, made again whenever pyproject.toml changes (.installed removes them)
$(VENV)/.extra-%: $(VENV)/.installed
	$(PIP) -e ".[dev,$*]"
	touch $@

setup-ray: setup $(VENV)/.extra-ray
setup-bench: setup $(VENV)/.extra-bench
setup-all: setup $(VENV)/.extra-ray $(VENV)/.extra-browser $(VENV)/.extra-bench

# compiled kernels, cached beside the code: again whenever the kernels or the buffers they take change
$(VENV)/.warm: $(VENV)/.installed dedup_assets/launch/warm.py dedup_assets/core/sketch/kernels.py dedup_assets/core/lsh/bucket_kernels.py dedup_assets/core/text/normalize.py dedup_assets/core/read/doc_ids.py dedup_assets/core/read/csv_scan.py
	$(BIN)/python -m dedup_assets.launch.warm
	touch $@

$(DAGSTER_HOME)/dagster.yaml:
	mkdir -p $(DAGSTER_HOME)
	printf 'telemetry:\n  enabled: false\n' > $@

# DEDUP_ENTRY: a message's fix is written for make run (dedup.yaml), which takes no options
run: setup
	@DEDUP_ENTRY=make $(BIN)/dedup run

dev: setup
	$(BIN)/dagster dev -w workspace.yaml

test: setup
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup --durations=15 -m "$(FAST)"

# the whole suite: the fast tier, then the slow, ray, browser, faults and bench tiers
test-all: setup-all
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup --durations=25

# Side by side with the peers on a generated corpus: make bench DOCS=100000 PERM=128
DOCS ?= 100000
PERM ?= 128
bench: setup-bench
	$(BIN)/python benchmarks/benchmark.py --docs $(DOCS) --perm $(PERM) --peers rensa,fastsketch-pre,fastsketch-vec

# the plain corpus with both of our runs, then a thousand web-length pages through the Dagster run
bench-smoke: setup
	$(BIN)/python benchmarks/benchmark.py --smoke
	$(BIN)/python benchmarks/benchmark.py --smoke --web

clean:
	rm -rf var output .dagster_home .tmp_dagster_home_*
	# numba's compiled-kernel caches: an index written by an older layout cannot be read again
	find dedup_assets -name __pycache__ -prune -exec rm -rf {} +
	rm -f $(VENV)/.warm
