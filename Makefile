# Two commands do all the set-up on a fresh machine:
#   make demo   - install servecap (base) and print the built-in capacity plan
#   make test   - install the dev dependencies and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test check lint bench clean browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# setup.py compiles these with mypyc (the simulator's and the planner's hot modules): an edit must rebuild them, or the stale .so would be imported
COMPILED_SIM := setup.py $(addprefix src/servecap/sim/,request_state.py queues.py scheduler_policy.py kv_pool.py \
	step_time.py engine.py engine_server.py traffic.py observer.py loop.py) \
	src/servecap/fleet/pools.py src/servecap/fleet/replica.py src/servecap/fleet/fleet.py src/servecap/fleet/cache_replay.py src/servecap/fleet/cache_replay_tiers.py src/servecap/fleet/run_tiers.py \
	src/servecap/fleet/pd/link.py \
	src/servecap/fleet/pd/replica.py src/servecap/fleet/pd/fleet.py src/servecap/policy/routers.py \
	src/servecap/core/roofline.py src/servecap/core/capacity.py \
	$(addprefix src/servecap/core/ops/,layers.py timers.py step.py)

$(VENV)/.base-installed: pyproject.toml $(COMPILED_SIM) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml $(COMPILED_SIM) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.base-installed

demo: $(VENV)/.base-installed
	$(BIN)/servecap plan

# The web UI's tests drive Debian's chromium (Playwright's own browser builds are not used):
# installed here when missing and this user can (root with apt-get), as on CI.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "note: install Debian's chromium for the browser tests (apt-get install chromium)"; fi; }

# two workers (pytest-xdist): the suite is CPU-bound and its tests isolated (free ports, tmp_path);
# tests of one real system (Ray, a router) share a worker, the browser tests are two such groups, and
# the groups and the slow tests are handed out first (tests/conftest.py: SERIAL_GROUPS)
test: $(VENV)/.dev-installed browser
	$(BIN)/python -m pytest -n 2 --dist loadgroup

check: $(VENV)/.dev-installed
	PATH="$(abspath $(BIN)):$$PATH" scripts/check

# scripts/check's static steps alone (ruff, format, mypy --strict, import contracts): CI runs
# this before the tests (.ci/run)
lint: $(VENV)/.dev-installed
	PATH="$(abspath $(BIN)):$$PATH" VENV="$(VENV)" scripts/check --static

bench: $(VENV)/.dev-installed
	$(BIN)/python benchmarks/plan_sweep.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
