# Quick start:   make demo    (train every method on the bundled ijcnn1 data)
#                make test    (the docstring examples, then the test suite; GPU tests on the GPU,
#                              else on the emulated GPU of tests/gpuemu, which needs g++; the
#                              header says which)
# Both create ./.venv on first use. CuPy is installed automatically when
# nvidia-smi finds a GPU (cupy-cuda13x for a CUDA 13 driver, else cupy-cuda12x).
# make test also installs the real CuPy into .venv/real-cupy, a folder of its own that the
# test process never imports from (tests/realcupy.py asks it in a subprocess: the stand-in's
# names and the library's calls are checked against it, and the CUDA sources go through its
# compile path); without it those checks are skipped, with the reason.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.gpuksvm-installed
REAL_CUPY := $(VENV)/real-cupy

.PHONY: demo test test-gpu test-emulated-full test-emulated-nofma bench bench-gpu clean-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip "setuptools>=70" wheel
	$(BIN)/python -m pip install -q -e ".[test,notebooks,dask,progress,fast]"
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	  major=$$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -n1); \
	  if [ "$${major:-12}" -ge 13 ]; then extra=cuda13; else extra=cuda12; fi; \
	  echo "GPU found (driver CUDA $$major): installing the $$extra extra (CuPy)"; \
	  $(BIN)/python -m pip install -q -e ".[$$extra]" || echo "CuPy install failed: gpuksvm will run on the CPU"; \
	else echo "no GPU found by nvidia-smi: CPU only (NumPy)"; fi
	touch $(STAMP)

# the real CuPy for the checks of tests/realcupy.py (no GPU needed); --no-deps: NumPy is the venv's
$(REAL_CUPY)/.installed: $(STAMP)
	rm -rf $(REAL_CUPY)
	$(BIN)/python -m pip install -q --no-deps --target $(REAL_CUPY) "cupy-cuda13x==14.*" \
	  "cuda-pathfinder==1.*" "nvidia-cuda-runtime==13.*" "nvidia-cuda-nvrtc==13.*" \
	  && touch $@ \
	  || echo "the real CuPy could not be installed: make test skips the real-CuPy checks (and says so)"

demo: $(STAMP)
	$(BIN)/python -m gpuksvm demo

# the docstring examples of every module of the package (a few seconds), then the test suite
# The suite runs on up to 4 processes (pytest-xdist, a module per process at a time: module
# fixtures are built once; one process on a real GPU, tests/conftest.py); TEST_WORKERS=0 runs it
# in this process.
TEST_WORKERS ?= auto
test: $(STAMP) $(REAL_CUPY)/.installed
	$(BIN)/python -m pytest -q -p no:cacheprovider --timeout=900 --doctest-modules gpuksvm
	$(BIN)/python -m pytest -q -p no:cacheprovider --timeout=900 -n $(TEST_WORKERS) --maxprocesses=4 --dist loadscope

test-gpu: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m gpu

# the emulated GPU with its slow cases and the full mutation sweep (minutes more)
test-emulated-full: $(STAMP)
	GPUKSVM_TEST_GPU=emulated GPUEMU_FULL=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m gpu

# the emulated GPU built without FMA contraction (the default fuses multiply-adds as NVRTC does)
test-emulated-nofma: $(STAMP)
	GPUKSVM_TEST_GPU=emulated GPUEMU_FMA=off $(BIN)/python -m pytest -q -p no:cacheprovider -m gpu

bench: $(STAMP)
	$(BIN)/python -m bench --all --scale small --report

bench-gpu: $(STAMP)
	$(BIN)/python bench/gpu_suite.py

clean-venv:
	rm -rf $(VENV) .gpuemu-cache
