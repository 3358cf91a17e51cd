# Two commands do everything: `make run` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

$(VENV)/.installed-server: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[server]'
	touch $@ $(VENV)/.installed

# The service on the embedded SQLite default at http://127.0.0.1:8765, with the demo catalogue and memories.
run: $(VENV)/.installed-server
	$(BIN)/memroute serve --demo

# The console's browser test drives Debian's Chromium (never a browser a test tool downloads); CJK fonts
# make its Japanese and Korean screenshots readable. Installed here when missing, waiting for another
# apt/dpkg run to finish instead of failing on its lock; if that is impossible, make test stops and says why.
test: $(VENV)/.installed-dev
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="chromium"; \
	if command -v dpkg >/dev/null && ! dpkg -s fonts-noto-cjk >/dev/null 2>&1; then missing="$$missing fonts-noto-cjk"; fi; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
	  echo "make test: installing$$missing (apt-get) for the console's browser test"; \
	  { $$sudo apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 update -q && \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 \
	      install -y -q $$missing; } || \
	  { echo "make test: could not install$$missing with apt-get; the browser test needs /usr/bin/chromium" >&2; \
	    exit 1; }; \
	fi
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/pytest -q

bench: $(VENV)/.installed-dev
	$(BIN)/python -m benchmarks.bench_store

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
