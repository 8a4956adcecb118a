# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# `make run` installs what serving needs and nothing else (`pip install -e .`: docs/index.md#set-up, measured
# there);
# `make test` adds the test stack below (CPU torch, xgrammar, the test, client and kv-events extras).
RUN_STAMP := $(VENV)/.installed-run
# The guided-decoding proof (tests/constraints/test_guided_*.py, the fake TensorRT-LLM) runs xgrammar on CPU, with the
# xgrammar TensorRT-LLM 1.1/1.2.0 pins and a torch, installed here, not declared by the package (its `guided`
# extra pins no torch, so it never replaces TensorRT-LLM's). The torch is the CPU build (2.2 GB venv instead of
# CUDA's 5.9 GB) where pip's configuration offers it (this workplace's find-links); from PyPI alone pip takes
# the CUDA build, which runs the same tests. The stamp names both pins: changing one reinstalls.
TORCH_SPEC ?= torch==2.13.0
XGRAMMAR_SPEC ?= xgrammar==0.1.25
STAMP := $(VENV)/.installed-$(subst ==,-,$(TORCH_SPEC))-$(subst ==,-,$(XGRAMMAR_SPEC))
HOST ?= 127.0.0.1
PORT ?= 8000
# Codex CLI from npm, for tests/clients/test_codex_cli.py (skipped when npm is not available).
CODEX_VERSION ?= 0.171.0
CODEX_DIR := .codex-cli
CODEX_STAMP := $(CODEX_DIR)/.installed-$(CODEX_VERSION)
# Claude Code from npm, for tests/clients/test_claude_code.py (skipped when npm is not available).
CLAUDE_CODE_VERSION ?= 2.1.332
CLAUDE_CODE_DIR := .claude-code
CLAUDE_CODE_STAMP := $(CLAUDE_CODE_DIR)/.installed-$(CLAUDE_CODE_VERSION)

.PHONY: run test test-install lint bench docs install clean grpc-stubs compliance guided-matrix codex-cli claude-code redis-server bubblewrap nginx prometheus litellm-client

# Tests start a real redis-server (Redis store, two-process scenarios). It comes from Debian's package:
# PyPI's bundled builds are years old (docs/stores-and-frontends.md#stores).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The test stack; with it the grpcio-tools the gRPC stubs were generated with (GRPCIO_TOOLS_SPEC, below):
# tests/executors/test_trtllm_grpc_wire.py regenerates the stubs and compares them byte for byte.
$(STAMP): pyproject.toml | $(BIN)/python
	@echo "Installing the test stack into $(VENV) (CPU torch, xgrammar, test, client, docs, kv-events, tracing and grpc extras: a few minutes)"
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)" "$(XGRAMMAR_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[test,clients,guided,docs,kv-events,tracing,grpc]"
	$(BIN)/python -m pip install --quiet "$(GRPCIO_TOOLS_SPEC)"
	@touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	@echo "Installing trtllm-responses into $(VENV) (serving only; make test adds the test stack)"
	$(BIN)/python -m pip install --quiet -e .
	@touch $(RUN_STAMP)

install: $(STAMP)

$(CODEX_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix $(CODEX_DIR) @openai/codex@$(CODEX_VERSION) && touch $(CODEX_STAMP); \
	else echo "npm not found: the Codex CLI tests will be skipped"; fi

codex-cli: $(CODEX_STAMP)

$(CLAUDE_CODE_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix $(CLAUDE_CODE_DIR) @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) && touch $(CLAUDE_CODE_STAMP); \
	else echo "npm not found: the Claude Code tests will be skipped"; fi

claude-code: $(CLAUDE_CODE_STAMP)

# LiteLLM, for tests/clients/test_chat_clients.py, in a virtualenv of its own: its releases that accept openai 3
# (which openai-agents needs) require a certifi newer than some package indexes hold
# (docs/chat-completions.md#chat-completions).
LITELLM_VENV := .venv-litellm
LITELLM_STAMP := $(LITELLM_VENV)/.installed

$(LITELLM_STAMP):
	$(PYTHON) -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install --quiet "litellm>=1.80" mcp   # litellm imports mcp without declaring it
	@touch $(LITELLM_STAMP)

litellm-client: $(LITELLM_STAMP)

# The guided-decoding proof on the other xgrammar releases TensorRT-LLM pins (0.1.32: 1.2.1 to 1.4.0rc1; 0.2.8:
# the newest), each in a venv of its own beside the default one (0.1.25): the constraints tests, the fake's
# adversarial sampler and the reader at GUIDED_MATRIX_SEEDS seeds per kind
# (docs/tools.md#tools-structured-outputs-and-constraints; results in benchmarks/RESULTS.md).
GUIDED_MATRIX ?= 0.1.32 0.2.8
GUIDED_MATRIX_SEEDS ?= 40

.venv-xgrammar-%/.installed: pyproject.toml
	$(PYTHON) -m venv .venv-xgrammar-$*
	.venv-xgrammar-$*/bin/python -m pip install --quiet "$(TORCH_SPEC)" "xgrammar==$*"
	.venv-xgrammar-$*/bin/python -m pip install --quiet -e ".[test,guided]"
	@touch $@

guided-matrix: $(foreach v,$(GUIDED_MATRIX),.venv-xgrammar-$(v)/.installed)
	@for v in $(GUIDED_MATRIX); do \
		echo "== xgrammar $$v"; \
		GUIDED_PROPERTY_SEEDS=$(GUIDED_MATRIX_SEEDS) .venv-xgrammar-$$v/bin/python -m pytest -q -p no:cacheprovider \
			tests/constraints tests/harmony/test_spelled.py || exit 1; \
	done

run: $(RUN_STAMP)
	$(BIN)/trtllm-responses serve --engine echo --host $(HOST) --port $(PORT)

redis-server:
	@command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends redis-server; }

# `--python_tool local` runs model-written code in a bubblewrap sandbox
# (docs/server-run-tools.md#gpt-osss-own-tools-python-code_interpreter-and-browser-web_search): Debian's
# package.
bubblewrap:
	@command -v bwrap >/dev/null || [ -x /usr/bin/bwrap ] || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends bubblewrap; }

# The session-affinity test (tests/server/test_nginx_affinity.py) runs a real nginx in front of two replicas:
# Debian's nginx-light (its upstream hash module routes by session). Tests start it themselves on a loopback
# port with a configuration and temp folder of their own; the package's own service is not used.
nginx:
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends nginx-light; }

# The dashboard test (tests/ops/test_dashboard.py) runs a real Prometheus scraping a test server, and promtool on
# the alert rules (examples/prometheus/): Debian's package (2.42 in bookworm). The tests start it themselves on a
# loopback port with a configuration and data folder of their own; the package's own service is not used.
prometheus:
	@command -v prometheus >/dev/null || [ -x /usr/bin/prometheus ] || \
		{ command -v apt-get >/dev/null || { echo "apt-get not found: the Prometheus tests will be skipped"; exit 0; }; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends prometheus; }

# The suite writes bytecode (__pycache__/, ignored by git) even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): otherwise each process it starts (servers, their render workers, CLI runs, the
# three workers that each collect every test module) compiles the package, and each worker the tests, from
# source again: ~0.3 s of CPU a process, ~5 s a worker's collection, about a minute of the run in all.
test: $(STAMP) codex-cli claude-code redis-server bubblewrap nginx prometheus litellm-client
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n 3 --dist loadscope -m "not install"

# The install tests (tests/package/test_install_pins.py, marked `install`): pip resolves the project against each
# TensorRT-LLM release's pins, and installs the lowest allowed versions into fresh venvs. ~2.5 minutes and
# ~3.5 of CPU (pip unpacks torch): outside `make test`'s 10 minutes; .ci/run runs them after it.
test-install: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -m install tests/package/test_install_pins.py

# The benchmarks draw their charts (benchmarks/charts/*.svg) with matplotlib: the `bench` extra.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/python benchmarks/run_all.py

# The manual (docs/, mkdocs.yml) into site/. --strict: a link to a missing page or heading anchor fails the
# build (mkdocs.yml's `validation`); tests/package/test_docs.py runs the same build in `make test`.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The Open Responses compliance suite's own runner (bun, from npm) against the echo server on loopback.
# OPENRESPONSES: a checkout of the openresponses repository (it holds bin/compliance-test.ts).
compliance: $(STAMP)
	@test -n "$(OPENRESPONSES)" || (echo "usage: make compliance OPENRESPONSES=/path/to/openresponses" && exit 2)
	$(BIN)/python scripts/openresponses_compliance.py $(OPENRESPONSES)

# The Python stubs of TensorRT-LLM's two gRPC wires, from the protos vendored in
# trtllm_responses/executors/trtllm_grpc/proto/ (SMG's protocol) and .../trtllm_grpc/openengine/proto/
# (OpenEngine's); the PIN.md beside each names their source and the grpcio-tools used.
GRPCIO_TOOLS_SPEC ?= grpcio-tools==1.85.1

grpc-stubs: $(STAMP)
	$(BIN)/python -m pip install --quiet "$(GRPCIO_TOOLS_SPEC)"
	$(BIN)/python scripts/grpc_stubs.py

lint: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/ruff check trtllm_responses tests benchmarks scripts
	$(BIN)/ruff format --check trtllm_responses tests benchmarks scripts
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build site *.egg-info $(CODEX_DIR) $(CLAUDE_CODE_DIR) $(LITELLM_VENV) .venv-xgrammar-*
