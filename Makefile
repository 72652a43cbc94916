# Every target creates .venv and installs what it needs from pyproject.toml; nothing else is assumed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python -c "import crowd.sim; crowd.sim.warm_up()"  # compile the crowd's step once (numba caches it)
	rm -f $(VENV)/.installed-* && touch $@

demo: $(STAMP)
	$(BIN)/hil demo

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info
