#!/usr/bin/env bash
# PyCUDA for the CUDA engine, including on a machine that has the NVIDIA driver but no CUDA
# toolkit. `make setup` (and so `make run` and `make test`) runs it where `nvidia-smi` works.
#
#   PY=.venv/bin/python bash packaging/install-pycuda.sh [--find-links DIR]
#
# With nvcc on PATH, PyCUDA builds against that toolkit as usual. Without one, it builds against
# the CUDA headers of NVIDIA's `nvidia-cuda-runtime` and `nvidia-cuda-profiler-api` wheels
# (cuda.h, cudaProfiler.h) and links the driver's own libcuda.so.1; kernels then compile
# through NVRTC (the `nvidia-cuda-nvrtc` wheel of the `cuda` extra), so nothing of the toolkit
# is needed at run time either.
# --find-links DIR: take pycuda's sdist and the wheels from DIR only (an offline machine).
# Needs a C++ compiler and the Python headers (Debian: g++ python3-dev).
set -euo pipefail
PY=${PY:-python3}
pip_opts=()
if [ "${1:-}" = "--find-links" ]; then pip_opts=(--no-index --find-links "$(cd "$2" && pwd)"); fi

if command -v nvcc >/dev/null 2>&1; then
    echo "install-pycuda: building PyCUDA against the CUDA toolkit of $(command -v nvcc)"
    exec "$PY" -m pip install -q "${pip_opts[@]}" "pycuda>=2024.1"
fi

libcuda=$( { ldconfig -p 2>/dev/null || true; } | awk '/libcuda\.so\.1 /{print $NF; exit}')
for candidate in /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 \
                 /usr/local/nvidia/lib64/libcuda.so.1; do
    [ -n "$libcuda" ] && break
    [ -e "$candidate" ] && libcuda=$candidate
done
if [ -z "$libcuda" ]; then
    echo "install-pycuda: no NVIDIA driver library (libcuda.so.1) found; the CPU engines will be used" >&2
    exit 1
fi
echo "install-pycuda: no nvcc; building PyCUDA against the nvidia-cuda-runtime wheel and $libcuda"
"$PY" -m pip install -q "${pip_opts[@]}" "nvidia-cuda-runtime>=13.0,<14" \
    "nvidia-cuda-profiler-api>=13.0,<14" setuptools wheel    # cuda.h, cudaProfiler.h
include=$("$PY" - <<'PYEOF'
import pathlib, nvidia
for base in nvidia.__path__:
    for sub in ("cu13/include", "cuda_runtime/include"):
        if (pathlib.Path(base) / sub / "cuda.h").exists():
            print(pathlib.Path(base) / sub)
            raise SystemExit
raise SystemExit("cuda.h not found in the nvidia-cuda-runtime wheel")
PYEOF
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/lib" && ln -s "$libcuda" "$work/lib/libcuda.so"    # the linker wants the plain name
"$PY" -m pip download -q "${pip_opts[@]}" --no-deps --no-binary pycuda --no-build-isolation \
    -d "$work" "pycuda>=2024.1"
tar -xzf "$work"/pycuda-*.tar.gz -C "$work"
cd "$work"/pycuda-*/
"$PY" configure.py --cuda-root="$(dirname "$include")" --cuda-inc-dir="$include" \
    --cudadrv-lib-dir="$work/lib" --no-cuda-enable-curand >/dev/null
"$PY" setup.py -q build_ext --parallel "$(nproc)" >/dev/null
"$PY" -m pip install -q "${pip_opts[@]}" --no-build-isolation .
cd /                                  # import the installed PyCUDA, not the source tree
"$PY" -c "import pycuda.driver as d; d.init(); print('install-pycuda: PyCUDA', __import__('pycuda').VERSION_TEXT, 'sees', d.Device.count(), 'device(s)')"
