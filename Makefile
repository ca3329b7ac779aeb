# `make run` sets up .venv and materializes the whole graph on data/documents.csv (quietly, with a
# summary at the end; `dagster asset materialize` prints Dagster's full log).
# `make test` sets up .venv and runs the test suite (what CI runs).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DAGSTER_HOME := $(CURDIR)/.dagster_home

.PHONY: setup run dev test bench bench-smoke clean

setup: $(VENV)/.installed $(VENV)/.warm $(DAGSTER_HOME)/dagster.yaml

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,ray]"
	touch $@

# compiled kernels, cached beside the code: again whenever the kernels or the buffers they take change
$(VENV)/.warm: $(VENV)/.installed dedup_assets/core/kernels.py dedup_assets/core/text.py dedup_assets/core/readers/doc_ids.py dedup_assets/core/readers/csv_scan.py
	$(BIN)/python -m dedup_assets.warm
	touch $@

$(DAGSTER_HOME)/dagster.yaml:
	mkdir -p $(DAGSTER_HOME)
	printf 'telemetry:\n  enabled: false\n' > $@

run: setup
	@$(BIN)/python -m dedup_assets.run

dev: setup
	$(BIN)/dagster dev -w workspace.yaml

test: setup
	$(BIN)/python -m pytest

# Side by side with the peers on a generated corpus: make bench DOCS=100000 PERM=128
DOCS ?= 100000
PERM ?= 128
bench: setup
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	$(BIN)/python benchmarks/benchmark.py --docs $(DOCS) --perm $(PERM) --peers rensa,fastsketch-pre

bench-smoke: setup
	$(BIN)/python benchmarks/benchmark.py --smoke

clean:
	rm -rf var output .dagster_home .tmp_dagster_home_*
	# numba's compiled-kernel caches: an index written by an older layout cannot be read again
	find dedup_assets -name __pycache__ -prune -exec rm -rf {} +
	rm -f $(VENV)/.warm
