# Set-up and the two entry points: `make demo` (main job) and `make test` (test suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEFAULT_PARAMS := params/kyber-3329.toml

.PHONY: setup demo test generated clean

setup: $(BIN)/kerngen
	@command -v nasm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing nasm from Debian's packages"; \
	    (apt-get install -y nasm >/dev/null 2>&1 || (apt-get update >/dev/null && apt-get install -y nasm >/dev/null)) \
	      || { echo "error: could not install nasm" >&2; exit 1; }; \
	  else \
	    echo "error: nasm is missing; install it (e.g. 'sudo apt-get install nasm') and run make again" >&2; exit 1; \
	  fi; }
	@command -v gcc >/dev/null 2>&1 || { echo "error: gcc is missing (the C harness needs it)" >&2; exit 1; }

$(BIN)/kerngen: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

demo: setup
	$(BIN)/kerngen emit $(DEFAULT_PARAMS) --out build/kyber-3329
	$(BIN)/kerngen test $(DEFAULT_PARAMS)
	$(BIN)/kerngen bench $(DEFAULT_PARAMS) --batches 51

test: setup
	$(BIN)/pytest -q

# regenerate every shipped bundle (the test suite fails when generated/ is stale)
generated: setup
	@for p in params/*.toml; do n=$$(basename $$p .toml); \
	  $(BIN)/kerngen emit $$p --out generated/$$n >/dev/null || exit 1; done

clean:
	rm -rf build $(VENV)
