# Two commands on a fresh machine:  `make bench` (the suite on the best device + a report) and
# `make test` (the unit and end-to-end tests). Both create the virtual environment on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= quick
DEVICE ?= auto
RESULTS ?= results

.PHONY: bench test test-floor check lint data clean

JOBS ?= auto
# pytest keeps each test module's rewritten assertions in __pycache__ and reads them back next time (half of a
# worker's collection), unless the environment asks Python never to write bytecode.
TEST_PY := PYTHONDONTWRITEBYTECODE= $(PY)

$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

# Real Fashion-MNIST offline (Debian's dataset-fashion-mnist); without it the suite uses real
# MNIST if present, else a synthetic stand-in, and says so in every row.
data:
	@if [ ! -d /usr/share/datasets/fashion-mnist ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist; \
	fi

bench: $(VENV)/.installed data
	$(VENV)/bin/gpubench run --device $(DEVICE) --profile $(PROFILE) --results-dir $(RESULTS)

# Every test, spread by pytest-xdist over half as many workers again as cores (-n auto: the process tests
# wait on their processes, tests/conftest.py; JOBS=0: in this one process); a test that hangs fails by name
# after 10 minutes.
test: $(VENV)/.installed
	$(TEST_PY) -m pytest tests --timeout 600 -n $(JOBS) --maxprocesses 8 --dist worksteal $(ARGS)

# The lowest versions pyproject.toml allows (constraints-floor.txt) in a venv of their own, running the tests of
# the pytest plugin and of `gpubench run` (builds, forks, budgets): CI runs it after `make test`.
FLOOR_VENV ?= .venv-floor
FLOOR_TESTS := tests/test_plugin.py tests/test_user_plugin.py tests/test_build_protocol.py tests/test_run_processes.py \
	tests/test_extra_builds.py tests/test_runner.py tests/test_energy.py tests/test_run_budget.py tests/test_cli.py

$(FLOOR_VENV)/.installed: pyproject.toml constraints-floor.txt
	python3 -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FLOOR_VENV)/bin/python -m pip install --quiet -c constraints-floor.txt -e '.[test]'
	touch $@

test-floor: $(FLOOR_VENV)/.installed
	PYTHONDONTWRITEBYTECODE= $(FLOOR_VENV)/bin/python -m pytest $(FLOOR_TESTS) --timeout 600 -n $(JOBS) --maxprocesses 8 --dist worksteal $(ARGS)

# The loop while editing: every test that starts no process (--no-processes fails one that does without
# the `process` mark), spread over the cores by pytest-xdist (JOBS=0 runs them in this one process; at most
# 8 workers, each imports torch). `make check ARGS=--lf` reruns what failed last time.
check: $(VENV)/.installed
	$(TEST_PY) -m pytest tests -q -m "not process and not slurm" --no-processes --timeout 120 -n $(JOBS) --maxprocesses 8 --dist worksteal $(ARGS)

# ruff, configured in pyproject.toml (100 columns, its formatter's layout); CI runs it before the tests.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) $(FLOOR_VENV) .benchmarks
