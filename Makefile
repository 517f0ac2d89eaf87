# Two commands matter: `make demo` and `make test`. Everything they need is installed here.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test lint typecheck unit install bench bench-deps bench-quick soak clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade 'pip>=25.1'

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -e .
	@touch $@

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/planrail demo

$(TEST_STAMP): pyproject.toml $(STAMP)
	$(PIP) install -e '.[postgres,openai,otel,web,ray,mcp]' --group test --group lint
	@touch $@

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/ruff format --check src tests bench examples
	$(VENV)/bin/lint-imports

typecheck: $(TEST_STAMP)
	$(VENV)/bin/mypy

unit: $(TEST_STAMP)
	bash scripts/ensure-chromium.sh
	source scripts/test-services.sh && $(VENV)/bin/pytest -q

# Long crash/soak and full-size fuzz tests (a small version of each runs in `make test`).
# The interruption soak runs PLANRAIL_SOAK_TRIALS trials (default 500): make soak PLANRAIL_SOAK_TRIALS=100
soak: $(TEST_STAMP)
	source scripts/test-services.sh && PLANRAIL_SOAK_TRIALS=$${PLANRAIL_SOAK_TRIALS:-500} $(VENV)/bin/pytest -q -m slow

test: lint typecheck unit

bench-deps: $(TEST_STAMP)
	$(PIP) install --group bench

bench-quick: bench-deps
	$(PY) -m bench.run_all --quick

bench: bench-deps
	$(PY) -m bench.run_all

clean:
	rm -rf $(VENV) .planrail .mypy_cache .ruff_cache .pytest_cache
