# pykraft — every target does its own setup: a fresh machine needs only python3 (>= 3.11) and make.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DATA_DIR ?= ./data

.PHONY: install run test lint format proto bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "pykraft needs Python >= 3.11, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,audit]'
	touch $(STAMP)

install: $(STAMP)

## make run — the product's main job (for now: write a demo metadata log under ./data and dump it)
run: $(STAMP)
	$(VENV)/bin/pykraft demo --data-dir $(DATA_DIR)
	$(VENV)/bin/pykraft log dump $(DATA_DIR)/__cluster_metadata-0

## make test — lint, then the whole test suite
test: $(STAMP) lint
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

## make bench — benchmarks (not part of the tests; they print figures and ratios against raw baselines)
bench: $(STAMP)
	$(PY) benchmarks/log_append.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info
