# Two commands on a fresh machine:  `make bench` (the suite on the best device + a report) and
# `make test` (the unit and end-to-end tests). Both create the virtual environment on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= quick
DEVICE ?= auto
RESULTS ?= results

.PHONY: bench test data clean

$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e .
	touch $@

# Real Fashion-MNIST offline (Debian's dataset-fashion-mnist); without it the suite uses real
# MNIST if present, else a synthetic stand-in, and says so in every row.
data:
	@if [ ! -d /usr/share/datasets/fashion-mnist ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist; \
	fi

bench: $(VENV)/.installed data
	$(VENV)/bin/gpubench run --device $(DEVICE) --profile $(PROFILE) --results-dir $(RESULTS)

test: $(VENV)/.installed
	$(PY) -m pytest tests

clean:
	rm -rf $(VENV) .benchmarks
