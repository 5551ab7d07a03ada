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

.PHONY: setup run lint test docs bench-ssa bundle wheel cache-clear clean warm test-gui-loaded bench-startup

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

# one worker per core (at most 4: the GUI and compile tests want memory), a test file per worker
# (its module fixtures built once)
test: setup lint
	$(XVFB) $(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile

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

# Compile every compiled CPU engine (and CUDA kernels where CUDA runs) with progress: the
# first runs then start on the compiled engines (without it they start on the reference ones)
warm: setup
	$(PY) -m app cache warm

# The GUI tests with every core saturated by stress-ng (Debian: apt-get install stress-ng):
# they wait for signals, never for times, so a busy machine only makes them slower
test-gui-loaded: setup
	@command -v stress-ng >/dev/null || { echo "stress-ng is not installed (apt-get install stress-ng)"; exit 2; }
	stress-ng --cpu 0 --cpu-load 100 --quiet --timeout 3h & load=$$!; \
	$(XVFB) $(PY) -m pytest -q tests/gui; rc=$$?; kill $$load; wait $$load; exit $$rc

# Time from Run to the first frame per panel, cold (empty caches) and warm: startup.json
bench-startup: setup
	$(XVFB) $(PY) -m app bench startup --out bench-results

clean:
	rm -rf $(VENV) build dist *.egg-info
