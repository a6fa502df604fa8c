# Two commands do all the set-up: `make demo` and `make test`.
# Each creates a local virtual environment (.venv) and installs what it needs first.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
# e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu: the CPU build of torch (a much smaller download)
TORCH_INDEX ?=

.PHONY: install demo test test-all test-cluster test-slow docs gpu-check gpu-bench gpu-all bench-losses clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PIP) install -q -e ".[all,test,docs]"
	touch $(STAMP)

install: $(STAMP)

# The main job: the quick cross-modality suite (graphs, images, sentences, loss timings; resumable:
# a second `make demo` skips every finished job), then the report built from the registry into results/report/
# (Markdown tables + HTML page with plots; the committed benchmarks/results/ is built from its snapshot only).
demo: $(STAMP)
	$(VENV)/bin/suite bench run quick --jobs 2
	$(VENV)/bin/suite bench report

# Two pytest workers (one torch thread each, tests/conftest.py), a test file to one worker: its module fixtures
# (the report's snapshot build) run once. TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -m "not slow" -q $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

test-all: $(STAMP)
	$(PY) -m pytest -q

# The slow tests against real services: the runner's cluster executors on a one-node SLURM cluster (Debian's slurm-wlm
# and munge) and a local Ray cluster, runs logging to a real MLflow server and one whose server dies, and the cluster faults
# of reliability round five (SLURM's controller down, jobs killed at each stage, requeues onto another node, PostgreSQL
# restarting, two login nodes): about 12 min on 2 cores, so not in `make test`; skipped, with the reason, where those
# are absent.
test-cluster: $(STAMP)
	$(PY) -m pytest -q tests/benchmarks/test_cluster_executors.py \
		tests/suite/test_trackers.py::test_mlflow_server_receives_params_metrics_and_export \
		tests/suite/test_trackers.py::test_a_server_gone_costs_a_warning_not_the_run \
		tests/reliability/test_round_five_cluster.py

# The slow tests CI runs beside `make test` (about 8 min): the reliability probes marked slow (two processes at once,
# a runner killed, a reuse decided on the data end to end, ranks that fail, a folder of 200,000 names; the cluster's
# own probes are in test-cluster), the fused kernels compiled for an H100 by ptxas (about 25 s of one core), every
# loss through AOT autograd and one through Inductor, docs/tiny.md's journeys on the real data (about 4 min), and the
# tests over 10 s of one core that make test leaves out to stay within 5 min (the tutorial, two-process BatchNorm, ...).
test-slow: $(STAMP)
	$(PY) -m pytest -m slow -q tests/reliability tests/suite/test_fused_compiles.py tests/suite/test_losses_compile.py \
		tests/docs/test_tiny.py tests/examples/test_tutorial.py tests/suite/test_engine.py tests/vision/test_cross_rank_bn.py \
		tests/benchmarks/test_paper_imagenet.py tests/benchmarks/test_runner.py \
		--ignore tests/reliability/test_round_five_cluster.py

# The documentation site (Sphinx + MyST), offline, a warning is an error: the API reference from the docstrings, the
# CLI reference from the parsers (docs/_ext/suite_docs.py). Open docs/_build/html/index.html.
docs: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m sphinx -b html -W --keep-going -q docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

# Every front-end a few steps on CUDA in bf16 autocast (2 processes under torchrun where there are 2 GPUs), the
# losses' CUDA values against the CPU's, throughput into the registry; without a GPU it says so and exits 0.
gpu-check: $(STAMP)
	$(PY) -m suite.gpu_check

# Each front-end's training step beside a plain PyTorch loop of the same model, and every loss against a plain InfoNCE,
# interleaved on one device (the issue's sizes on a GPU, a tiny size on the CPU); recorded in the registry, then
# benchmarks/results/gpu_bench.md from the registry.
gpu-bench: $(STAMP)
	$(PY) -m benchmarks.measurements.gpu_bench

# Every GPU measurement in one call, in order of value, within 10 minutes on one GPU, all into the registry: gpu-check's
# losses, gpu-bench (the loss core eager and compiled, then the front-ends), the fused kernels at 2N = 8,192 / 32,768 /
# 131,072, gpu-check's front-ends, and the image loader feeding ResNet-50 where benchmarks/measurements/image_loader.py
# exists; a summary at the end (docs/gpu.md).
gpu-all: $(STAMP)
	$(PY) -m benchmarks.measurements.gpu_all

clean:
	rm -rf $(VENV) build *.egg-info docs/_build
