# Each target bootstraps .venv when it is missing, and reinstalls only when pyproject.toml changed.
PYTHON ?= python3.11
VENV   := .venv
STAMP  := $(VENV)/.installed
CORES  ?= all

.PHONY: reproduce test test-all lint bench clean-venv

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $(STAMP)

reproduce: $(STAMP)
	$(VENV)/bin/snakemake --cores $(CORES) --configfile config/config.yaml

test: $(STAMP)
	$(VENV)/bin/pytest -q

test-all: $(STAMP)
	$(VENV)/bin/pytest -q -m ''

lint: $(STAMP)
	$(VENV)/bin/snakemake --lint

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(VENV)/bin/python $$b || exit 1; done

clean-venv:
	rm -rf $(VENV)
