# Two commands do all the set-up: `make demo` and `make test`.
# Each creates a local virtual environment (.venv) and installs what it needs first.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
# e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu: the CPU build of torch (a much smaller download)
TORCH_INDEX ?=

.PHONY: install demo test test-all bench-losses clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PIP) install -q -e ".[all,test]"
	touch $(STAMP)

install: $(STAMP)

# The main job: the quick cross-modality suite (graphs, images, sentences, loss timings; resumable:
# a second `make demo` skips every finished job), then the report built from the registry
# (Markdown tables + HTML page with plots).
demo: $(STAMP)
	$(VENV)/bin/suite bench run quick --jobs 2
	$(VENV)/bin/suite bench report

test: $(STAMP)
	$(PY) -m pytest -m "not slow" -q

test-all: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info
