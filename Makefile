# `make run` and `make test` work on a fresh machine with Python 3.11: they build .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv run test test-fast lint format clean chromium

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

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

# PostgreSQL: when one answers (scripts/postgres_url.py), the postgres-marked tests run on it in a
# second pytest run and the rest on SQLite; otherwise all of them on SQLite. The output says which.
test: venv chromium
	url="$$($(BIN)/python scripts/redis_url.py --test)"; \
	if [ -n "$$url" ]; then export REDIS_URL="$$url"; fi; \
	pg="$$($(BIN)/python scripts/postgres_url.py)"; status=0; \
	if [ -n "$$pg" ]; then \
		echo "PostgreSQL answers: the postgres-marked tests run on it, the others on SQLite"; \
		env -u DATABASE_URL $(BIN)/python -m pytest -m "not postgres" --durations=30 $(PYTEST_ARGS) || status=$$?; \
		echo "== the postgres-marked tests on PostgreSQL ($${pg%%@*}@...) =="; \
		DATABASE_URL="$$pg" $(BIN)/python -m pytest -m postgres --durations=10 $(PYTEST_ARGS) || [ $$? = 5 ] || status=1; \
	else \
		echo "no PostgreSQL answers (set DATABASE_URL=postgres://...): the postgres-marked tests run on SQLite"; \
		$(BIN)/python -m pytest --durations=30 $(PYTEST_ARGS) || status=$$?; \
	fi; \
	exit $$status

test-fast: venv
	$(BIN)/python -m pytest -m "not integration and not slow and not browser" $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
