# Two entry points (see README.md):
#   make run    set up .venv and start the GUI on its default preset
#   make test   set up .venv and run the whole test suite (under Xvfb when there is no display)
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
# The 'cuda' extra (pycuda, built against the local toolkit) only where nvcc and a driver exist.
EXTRAS := gui,test,sweep$(shell command -v nvcc >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo ,cuda)
XVFB   := $(if $(DISPLAY),,$(if $(shell command -v xvfb-run),xvfb-run -a --server-args="-screen 0 1600x1000x24"))

.PHONY: setup run test bench-ssa clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(PY) -m app

test: setup
	$(XVFB) $(PY) -m pytest -q

bench-ssa: setup
	$(PY) -m app bench ssa

clean:
	rm -rf $(VENV) build *.egg-info
