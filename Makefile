# Each target bootstraps .venv when it is missing, and reinstalls only when pyproject.toml changed.
PYTHON ?= python3.11
VENV   := .venv
STAMP  := $(VENV)/.installed
CORES  ?= all

.PHONY: reproduce standard paper-widths growth docs test test-all test-slurm paper-smoke gpu-check gpu-check-2 lint bench clean-venv

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The default run; its wall and CPU time and the machine go to results/quick/reproduce.json.
reproduce: $(STAMP)
	$(VENV)/bin/python -m scalemech.pipeline.runrecord results/quick/reproduce.json -- \
		$(VENV)/bin/snakemake --cores $(CORES) --configfile config/config.yaml

# The papers' own data (config/standard.yaml): CIFAR-10 ResNets over 2.8 doublings of depth and llamas over 3
# of width, every state-dependent claim trained and early in training (<= 75 min on 2 cores, docs/science.md §7.1).
# CIFAR-10 comes from data/cifar-10-python.tar.gz, or is downloaded there by torchvision when online, or is read
# from CIFAR10_ARCHIVE (the official tarball or an image-folder archive); its record: results/standard/reproduce.json.
CIFAR10_ARCHIVE ?=
standard: $(STAMP)
	$(VENV)/bin/python -m scalemech.pipeline.runrecord results/standard/reproduce.json -- \
		$(VENV)/bin/snakemake --cores $(CORES) --configfile config/standard.yaml \
		$(if $(CIFAR10_ARCHIVE),--config "datasets={cifar10: {archive: $(abspath $(CIFAR10_ARCHIVE))}}")

# Paper W's widths 512-3072 at initialization and along 16 steps (config/paper-widths.yaml, 15-30 min on
# 2 cores); its wall and CPU time go to results/paper-widths/reproduce.json.
paper-widths: $(STAMP)
	$(VENV)/bin/python -m scalemech.pipeline.runrecord results/paper-widths/reproduce.json -- \
		$(VENV)/bin/snakemake --cores $(CORES) --configfile config/paper-widths.yaml

# E12, growth for domain adaptation (config/growth.yaml: four llamas trained on pystdlib, grown into the
# pydoc documentation text at every placement rule); its wall and CPU time go to results/growth/reproduce.json.
growth: $(STAMP)
	$(VENV)/bin/python -m scalemech.pipeline.runrecord results/growth/reproduce.json -- \
		$(VENV)/bin/snakemake --cores $(CORES) --configfile config/growth.yaml

# The README's results blocks and docs/<run>/ from the last `make reproduce`, `make standard`, `make paper-widths`
# and `make growth` (a run not made yet: its block says so); the blocks of docs/grow.md and docs/cluster.md;
# the design tables of docs/science.md §6; config/README.md from the config schema;
# docs/rules.md from the workflow's rules.
docs: $(STAMP)
	$(VENV)/bin/python -m scalemech.pipeline.readme --run quick
	$(VENV)/bin/python -m scalemech.pipeline.readme --run standard --not-run-ok
	$(VENV)/bin/python -m scalemech.pipeline.readme --run paper-widths --not-run-ok
	$(VENV)/bin/python -m scalemech.pipeline.readme --run growth --not-run-ok
	$(VENV)/bin/python -m scalemech.pipeline.readme --tests
	$(VENV)/bin/python -m scalemech.pipeline.readme --memory
	$(VENV)/bin/python -m scalemech.pipeline.readme --gpu-hours
	$(VENV)/bin/python -m scalemech.pipeline.readme --design
	$(VENV)/bin/python -m scalemech.config.doc
	$(VENV)/bin/python -m scalemech.pipeline.rulesdoc

# On every core (pytest-xdist), a file per worker at a time, the Snakemake files first (tests/conftest.py).
# make test records its wall and CPU time and the machine in $(TEST_RECORD) (the README's block, make docs);
# e.g. `ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 make test TEST_RECORD=results/test/avx2.json`.
PYTEST := $(VENV)/bin/pytest -q -n auto --dist loadfile --no-loadscope-reorder
TEST_RECORD ?= results/test/native.json

test: $(STAMP)
	$(VENV)/bin/python -m scalemech.pipeline.runrecord $(TEST_RECORD) -- $(PYTEST)

test-all: $(STAMP)
	$(PYTEST) -m ''

# The tiny run through workflow/profiles/slurm on a one-node SLURM cluster set up on this machine
# (needs root; installs slurm-wlm, munge and the executor plugin; several minutes). Not in `make test`.
test-slurm: $(STAMP)
	VENV=$(abspath $(VENV)) bash tests/slurm/run.sh

# config/paper.yaml at toy size on this machine's CPUs (scalemech.pipeline.smoke): fixtures in the real formats
# and the derived config in $(SMOKE_DIR), then every rule of the paper's run there, from scratch: every
# table, figure and the report under $(SMOKE_DIR)/{results,figures}/paper-smoke/.
SMOKE_DIR ?= results/smoke
paper-smoke: $(STAMP)
	rm -rf $(SMOKE_DIR)
	$(VENV)/bin/python -m scalemech.pipeline.smoke --out $(SMOKE_DIR)
	$(VENV)/bin/snakemake --snakefile $(CURDIR)/Snakefile --cores $(CORES) \
		--configfile $(abspath $(SMOKE_DIR))/paper-smoke.yaml --directory $(abspath $(SMOKE_DIR))

# The GPU questions in one command, each section time-boxed, one line each (benchmarks/cuda_check.py; under
# 8 minutes on an H200): CIFAR=<archive> for the CIFAR line (the official tarball or an image-folder archive);
# GPU_PYTHON=<python> to use an environment that already holds torch and the dependencies instead of .venv;
# GPU_CHECK_ARGS=--cpu-only runs every section a CPU can run, at toy sizes.
GPU_PYTHON ?=
CIFAR ?=
GPU_CHECK_ARGS ?=
gpu-check: $(if $(GPU_PYTHON),,$(STAMP))
	PYTHONPATH=src PYTHONUNBUFFERED=1 $(or $(GPU_PYTHON),$(VENV)/bin/python) benchmarks/cuda_check.py \
		$(if $(CIFAR),--cifar $(CIFAR)) $(GPU_CHECK_ARGS)

# One arm of grow trained on two GPUs (torchrun, nccl), replicated and then sharded per decoder layer (FSDP2),
# against one GPU at the same global batch (benchmarks/ddp_check.py; needs two CUDA devices, about a minute).
gpu-check-2: $(STAMP)
	$(VENV)/bin/python benchmarks/ddp_check.py --device cuda --processes 2
	$(VENV)/bin/python benchmarks/ddp_check.py --device cuda --processes 2 --shard

# Snakemake's own lints, snakefmt on the rules, ruff's lints and formatter on the Python, and the import
# contracts of the layers (pyproject.toml configures ruff and import-linter).
lint: $(STAMP)
	$(VENV)/bin/snakemake --lint
	$(VENV)/bin/snakefmt --check Snakefile workflow/rules/
	$(VENV)/bin/ruff check src tests workflow/scripts benchmarks
	$(VENV)/bin/ruff format --check src tests workflow/scripts benchmarks
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(VENV)/bin/python $$b || exit 1; done

clean-venv:
	rm -rf $(VENV)
