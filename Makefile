# `make run` and `make test` work on a fresh machine with Python 3.11: they build .venv first,
# from requirements-dev.lock (exact versions and hashes, so every machine installs what CI
# tested). requirements*.txt say what we depend on; `make lock` turns them into the lock.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements-dev.lock
# pip on some machines warns once per package about an index folder it does not have
# ("Location ... is ignored"): hundreds of lines that say nothing to a user of `make run`.
QUIET_PIP := 2>&1 | { grep -v "is ignored: it is" || true; }; test $${PIPESTATUS[0]} -eq 0
SHELL := /bin/bash

.PHONY: venv run test test-fast lint format clean chromium lock

$(STAMP): $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK) $(QUIET_PIP)
	touch $(STAMP)

venv: $(STAMP)

# Refresh the lock from requirements*.txt (newest versions they allow), with pip-tools in its own
# venv (.venv-lock) so the tool never lands in the app's. torch stays pinned to 2.13.0 in
# requirements.txt: another build pulls gigabytes of CUDA packages, which the last line refuses.
lock:
	test -x $(VENV)-lock/bin/pip-compile || { $(PYTHON) -m venv $(VENV)-lock && $(VENV)-lock/bin/pip install --quiet pip-tools $(QUIET_PIP); }
	CUSTOM_COMPILE_COMMAND="make lock" $(VENV)-lock/bin/pip-compile --quiet --generate-hashes --allow-unsafe \
		--strip-extras --no-emit-index-url --no-emit-find-links -o $(LOCK) requirements-dev.txt $(QUIET_PIP)
	! grep -E '^(nvidia-|triton)' $(LOCK) | grep -v '^nvidia-ml-py'

# daphne + one CPU worker + Redis (embedded when REDIS_URL is unset and nothing answers on 6379).
run: venv
	$(BIN)/python scripts/devserver.py

# The whole suite. Redis: REDIS_URL, else DB 10 of 127.0.0.1:6379, else the tests start the
# embedded one.
# The browser tests drive Debian's chromium (Playwright cannot download its own browser here).
# Installed when missing and we are root; otherwise those tests skip and say why.
chromium:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium for the browser tests"; \
		(apt-get install -y chromium >/dev/null 2>&1 || (apt-get update >/dev/null && apt-get install -y chromium >/dev/null)) \
			|| echo "could not install chromium: the browser tests will skip"; \
	fi

# Three pytest runs, each ending with its own summary line; the first failure does not stop the others.
# 1. The in-process tests (neither integration nor browser) on 2 xdist processes, one torch thread each,
#    a test file per process at a time (a module's fixtures are built once): they share nothing but the
#    machine (own SQLite file, own data folder per test).
# 2. The integration and browser tests, also on 2 processes, a file per process at a time: each test has
#    its own Redis key prefix, ports and data folder, each process its own database, and they spend much of
#    their time waiting (worker start-ups, leases, a socket's silence, a browser) rather than computing.
#    On the shared 2-core VM the same 78 tests took 1051 s side by side, 1444 s one at a time (back to back).
# 3. PostgreSQL: when one answers (scripts/postgres_url.py), the postgres-marked tests run on it;
#    otherwise they run on SQLite in the first two runs. The output says which.
XDIST := -n 2 --dist loadfile
test: venv chromium
	url="$$($(BIN)/python scripts/redis_url.py --test)"; \
	if [ -n "$$url" ]; then export REDIS_URL="$$url"; fi; \
	pg="$$($(BIN)/python scripts/postgres_url.py)"; status=0; \
	if [ -n "$$pg" ]; then \
		echo "PostgreSQL answers: the postgres-marked tests run on it, the others on SQLite"; not_pg=" and not postgres"; \
	else \
		echo "no PostgreSQL answers (set DATABASE_URL=postgres://...): the postgres-marked tests run on SQLite"; not_pg=""; \
	fi; \
	echo "== in-process tests, 2 processes =="; \
	env -u DATABASE_URL OMP_NUM_THREADS=1 $(BIN)/python -m pytest $(XDIST) -m "not integration and not browser$$not_pg" \
		--durations=15 $(PYTEST_ARGS) || status=$$?; \
	echo "== integration and browser tests, 2 processes =="; \
	env -u DATABASE_URL $(BIN)/python -m pytest $(XDIST) -m "(integration or browser)$$not_pg" --durations=15 $(PYTEST_ARGS) \
		|| status=$$?; \
	if [ -n "$$pg" ]; then \
		echo "== the postgres-marked tests on PostgreSQL ($${pg%%@*}@...) =="; \
		DATABASE_URL="$$pg" $(BIN)/python -m pytest -m postgres --durations=10 $(PYTEST_ARGS) || [ $$? = 5 ] || status=1; \
	fi; \
	exit $$status

test-fast: venv
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest $(XDIST) -m "not integration and not slow and not browser" $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) $(VENV)-lock var .pytest_cache .ruff_cache
