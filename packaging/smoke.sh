#!/usr/bin/env bash
# What a new user does with what we ship, from outside the checkout (CI runs it after the tests):
# the built wheel in a clean venv (CLI run of a preset by name, the GUI starts), then the desktop
# bundle (devices, a small SSA run). Uses xvfb-run for the GUI where there is no display.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$top/.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gui() { if [ -n "${DISPLAY:-}" ]; then "$@"; else xvfb-run -a "$@"; fi; }

echo "== wheel"
rm -rf "$top/dist"/biogpu_studio-*.whl
"$PY" -m pip install -q build
"$PY" -m build -q -w -o "$top/dist" "$top" >/dev/null
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$(ls "$top"/dist/biogpu_studio-*.whl)[gui]"
cd "$work"
"$work/venv/bin/biogpu" run birth-death --backend cpu --set ensemble.realizations=64 \
    --set ensemble.t_end=2 --out "$work/wheel-run" >/dev/null
test -s "$work/wheel-run/results.npz" && test -s "$work/wheel-run/plot.png"
gui "$work/venv/bin/biogpu" gui --quit-after 3 >/dev/null 2>&1
if [ -f "$top/docs/_build/html/index.html" ]; then     # make docs ran: Help › Documentation ships
    "$work/venv/bin/python" -c "from app.gui.help import docs_index as d; i = d(); assert i and '_data' in i.parts, i"
fi
echo "wheel: installed, ran a preset from $work, GUI started and closed"

echo "== bundle"
make -C "$top" bundle
bundle="$top/dist/biogpu-studio/biogpu-studio"
"$bundle" devices
"$bundle" run birth-death --backend cpu --set ensemble.realizations=64 --set ensemble.t_end=2 \
    --out "$work/bundle-run" --no-png >/dev/null
test -s "$work/bundle-run/results.npz"
# the cardiac panel's CPU default: a CellML model through Myokit's importer, inside the bundle
"$bundle" run 03-sheet-spiral-s1s2-ach-small --backend cpu --set protocol.t_end=5 \
    --out "$work/bundle-cardiac" --no-png >/dev/null 2>"$work/bundle-cardiac.log"
test -s "$work/bundle-cardiac/results.npz"
if grep -q "could not be prepared" "$work/bundle-cardiac.log"; then      # the compiled engine must build
    cat "$work/bundle-cardiac.log"; exit 1
fi
echo "bundle: $(du -sh "$top/dist/biogpu-studio" | cut -f1), ran an SSA and a cardiac preset from $work"
