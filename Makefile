# Two commands do all the set-up on a fresh machine:
#   make demo   - install servecap (base) and print the built-in capacity plan
#   make test   - install the dev dependencies and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test check bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# setup.py compiles these with mypyc: an edit must rebuild them, or the stale .so would be imported
COMPILED_SIM := setup.py $(addprefix src/servecap/sim/,request_state.py queues.py kv_pool.py step_time.py \
	engine.py engine_server.py traffic.py observer.py loop.py)

$(VENV)/.base-installed: pyproject.toml $(COMPILED_SIM) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml $(COMPILED_SIM) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.base-installed

demo: $(VENV)/.base-installed
	$(BIN)/servecap plan

test: $(VENV)/.dev-installed
	$(BIN)/python -m pytest

check: $(VENV)/.dev-installed
	PATH="$(abspath $(BIN)):$$PATH" scripts/check

bench: $(VENV)/.dev-installed
	$(BIN)/python benchmarks/plan_sweep.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
