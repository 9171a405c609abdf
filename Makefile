# Two quick-start commands: `make run` and `make test`. Both (re)build .venv from pyproject.toml.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint verify clean-run

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "checkpoint-tui needs Python 3.11+"'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/checkpoint-tui

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

verify: $(STAMP)
	$(VENV)/bin/checkpoint-tui --verify

lint: $(STAMP)
	$(VENV)/bin/ruff check .
