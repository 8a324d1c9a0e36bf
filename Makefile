# Set-up and the two entry points: `make demo` (main job) and `make test` (test suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEFAULT_PARAMS := params/kyber-3329.toml

.PHONY: setup demo test generated docs clean

setup: $(BIN)/kerngen
	@bash tools/system-packages.sh

$(BIN)/kerngen: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip 'setuptools>=77'
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

demo: setup
	$(BIN)/kerngen emit $(DEFAULT_PARAMS) --out build/kyber-3329
	$(BIN)/kerngen test $(DEFAULT_PARAMS)
	$(BIN)/kerngen bench $(DEFAULT_PARAMS) --batches 51

# a worker per core and one more: a worker waiting for a bundle another is building (the store's lock), for
# Wine or for a compiler leaves its core to the spare one; work is stolen from a busy worker's queue, as a
# few tests (the first to need a large bundle) take a minute and most a second
WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

test: setup
	$(BIN)/pytest -q -n $(WORKERS) --dist worksteal

# regenerate every shipped bundle (the test suite fails when generated/ is stale)
generated: setup
	@for p in params/*.toml; do n=$$(basename $$p .toml); \
	  $(BIN)/kerngen emit $$p --out generated/$$n >/dev/null || exit 1; done

# the documentation site (docs/, mkdocs.yml) into build/site; the test suite builds it too
docs: setup
	$(BIN)/mkdocs build --strict

clean:
	rm -rf build $(VENV)
