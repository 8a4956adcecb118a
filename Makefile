# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint bench install clean compliance redis-server

# Tests start a real redis-server (Redis store, two-process scenarios). It comes from Debian's package:
# PyPI's bundled builds are years old (README, "Stores").
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/trtllm-responses serve --engine echo --host $(HOST) --port $(PORT)

redis-server:
	@command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends redis-server; }

test: $(STAMP) redis-server
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# The Open Responses compliance suite's own runner (bun, from npm) against the echo server on loopback.
# OPENRESPONSES: a checkout of the openresponses repository (it holds bin/compliance-test.ts).
compliance: $(STAMP)
	@test -n "$(OPENRESPONSES)" || (echo "usage: make compliance OPENRESPONSES=/path/to/openresponses" && exit 2)
	$(BIN)/python scripts/openresponses_compliance.py $(OPENRESPONSES)

lint: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/ruff check trtllm_responses tests
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info
