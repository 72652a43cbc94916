# Every target creates .venv and installs what it needs from pyproject.toml; nothing else is assumed.
#   make demo    the main job on the built-in virtual robot (installs hil alone)
#   make test    the whole suite (hil + the test extra: only what the tests import; + view: the viewer they drive),
#                and .venv-ros: the ros extra's ROS 2 wheels alone, in a venv of their own (the ROS tests' nodes)
#   make bench   side-by-side benchmarks (+ the bench extra: the peers, JuPedSim and pysocialforce among them)
#   make calibration-coverage   `hil calibrate ring` on the virtual commbot over a grid of hidden ring numbers:
#                how often the 95 % intervals hold them, and the bias (SEEDS=N seeds a cell; ~10 min at 1)
#   make fuzz    the long fuzz run against every server (1M messages each), every config kind (5,000 files), a
#                trial's saved states (300 damaged states/ folders resumed from) and the bus decoder (1M streams)
#   make wheel-smoke   the wheel installed in a fresh venv outside the checkout, used from another folder
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUM := $(shell cksum pyproject.toml | cut -d' ' -f1)
WARM := $(BIN)/python -c "from hil.crowd.sim import warm_up; warm_up()"  # compile the crowd's step once (numba caches it)

ROS_VENV := .venv-ros
# the ros extra's packages, read from pyproject.toml: the bridge's venv holds those, not hil
ROS_PACKAGES = $(shell $(PYTHON) -c "import tomllib; print(' '.join(chr(39) + p + chr(39) for p in tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['ros']))")

.PHONY: demo test bench calibration-coverage fuzz wheel-smoke clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# one stamp per set of extras and pyproject.toml version: a changed pyproject or a new extra installs again
$(VENV)/.installed-core-$(SUM): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	$(WARM)
	touch $@

$(VENV)/.installed-test-$(SUM): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,view]'
	$(WARM)
	touch $@

$(VENV)/.installed-bench-$(SUM): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,view,bench]'
	$(WARM)
	touch $@

$(ROS_VENV)/.installed-$(SUM): pyproject.toml
	$(PYTHON) -m venv $(ROS_VENV)
	$(ROS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ROS_VENV)/bin/python -m pip install --quiet $(ROS_PACKAGES)
	touch $@

demo: $(VENV)/.installed-core-$(SUM)
	$(BIN)/hil demo

test: $(VENV)/.installed-test-$(SUM) $(ROS_VENV)/.installed-$(SUM)
	HIL_ROS_PYTHON=$(CURDIR)/$(ROS_VENV)/bin/python $(BIN)/python -m pytest

bench: $(VENV)/.installed-bench-$(SUM)
	$(BIN)/python -m bench

calibration-coverage: $(VENV)/.installed-test-$(SUM)
	$(BIN)/python -m bench.calibration_coverage --grid full --seeds $${SEEDS:-1}

fuzz: $(VENV)/.installed-test-$(SUM)
	HIL_TEST_HANG_S=$${HIL_TEST_HANG_S:-0} FUZZ_N=$${FUZZ_N:-1000000} FUZZ_YAML_N=$${FUZZ_YAML_N:-5000} \
		FUZZ_STATES_N=$${FUZZ_STATES_N:-300} FUZZ_DECODER_N=$${FUZZ_DECODER_N:-1000000} $(BIN)/python -m pytest \
		tests/test_fuzz_servers.py tests/test_fuzz_yaml.py tests/test_fuzz_states.py tests/test_decoder_fuzz.py \
		-q --durations=0

wheel-smoke:
	bash .ci/wheel_smoke

clean:
	rm -rf $(VENV) $(ROS_VENV) build *.egg-info
