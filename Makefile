# Two entry points (see README.md):
#   make run    set up .venv and start the GUI on its default preset
#   make test   set up .venv, run the linters (make lint) and the whole test suite (under Xvfb
#               when there is no display)
# and:  make bundle (desktop bundle in dist/), make cache-clear (compiled kernels), make wheel,
#       make docs (the HTML documentation in docs/_build/html, warnings as errors)
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
EXTRAS := gui,test,sweep
# Where an NVIDIA driver answers: NVRTC from NVIDIA's wheel, and PyCUDA built against the local
# toolkit or, without one, against NVIDIA's header wheels (packaging/install-pycuda.sh).
HAVE_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
XVFB   := $(if $(DISPLAY),,$(if $(shell command -v xvfb-run),xvfb-run -a --server-args="-screen 0 1600x1000x24"))

.PHONY: setup run lint test docs bench-ssa bundle wheel cache-clear clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
ifeq ($(HAVE_GPU),yes)
	$(PY) -m pip install -q "nvidia-cuda-nvrtc>=13.0,<14"
	PY=$(PY) bash packaging/install-pycuda.sh || echo "PyCUDA could not be built: the CPU engines will run (see above)"
endif
	touch $@

setup: $(VENV)/.installed

run: setup
	$(PY) -m app

# The layer rules (pyproject's [tool.importlinter]), ruff, a type check of the shared core and
# the generated benchmark tables
lint: setup
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) scripts/bench_tables.py --check    # docs/benchmarks.md and README's table from benchmarks/

test: setup lint
	$(XVFB) $(PY) -m pytest -q

# Warnings are errors (-W), references are checked (-n), then every internal link (linkcheck,
# external links ignored: docs/conf.py). The CLI and config references are generated here.
$(VENV)/.docs-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[docs]"
	touch $@

docs: $(VENV)/.docs-installed
	$(PY) -m sphinx -W --keep-going -n -q -b html -d docs/_build/doctrees docs docs/_build/html
	$(PY) -m sphinx -W --keep-going -n -q -b linkcheck -d docs/_build/doctrees docs docs/_build/linkcheck

bench-ssa: setup
	$(PY) -m app bench ssa

wheel: setup docs
	$(PY) -m pip install -q build
	$(PY) -m build -o dist .

bundle: setup docs
	$(PY) -m pip install -q "pyinstaller>=6.5"
	$(PY) -m PyInstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller packaging/biogpu.spec
	@du -sh dist/biogpu-studio

cache-clear: setup
	$(PY) -m app cache clear

clean:
	rm -rf $(VENV) build dist *.egg-info
