# Every target creates .venv and installs what it needs from pyproject.toml; nothing else is assumed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test fuzz bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	rm -f $(VENV)/.installed-* && touch $@

demo: $(STAMP)
	$(BIN)/hil demo

test: $(STAMP)
	$(BIN)/python -m pytest

# every server fed FUZZ_N seeded random messages (make test sends 10,000 each); a shorter run: make fuzz FUZZ_N=100000
FUZZ_N ?= 1000000
fuzz: $(STAMP)
	FUZZ_N=$(FUZZ_N) $(BIN)/python -m pytest tests/test_fuzz_servers.py --durations=0 -o faulthandler_timeout=0

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info
