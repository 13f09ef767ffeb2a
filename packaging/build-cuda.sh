#!/usr/bin/env bash
# Builds a CUDA wheel of llama-cpp-python into a folder, for the GPUs you name.
#
#   packaging/build-cuda.sh                       A100 through H100/H200 (sm 80, 86, 89, 90)
#   packaging/build-cuda.sh --arch 90             one architecture: several times faster to build
#   packaging/build-cuda.sh --out DIR --jobs N    where the wheel goes (dist/cuda), compile jobs (all cores)
#   packaging/build-cuda.sh --version X.Y.Z       which llama-cpp-python (default: the one in .venv, else 0.3.36)
#
# Then, in the venv that runs LlamaDesk:
#   .venv/bin/pip install --force-reinstall --no-deps dist/cuda/llama_cpp_python-*.whl
#   .venv/bin/pip install nvidia-cublas     # the cuBLAS libraries the wheel links against
# and put the cuBLAS and CUDA runtime folders this script prints on LD_LIBRARY_PATH.
#
# Why the extra steps: a plain CMAKE_ARGS="-DGGML_CUDA=on" pip install stops at
# CMake when the toolkit comes from NVIDIA's PyPI wheels, which have no cuBLAS
# (CUDA::cublas not found) and no driver stub (CUDA::cuda_driver not found).
# cuBLAS comes from the nvidia-cublas wheel, merged with the toolkit into one
# folder CMake can search; GGML_CUDA_NO_VMM drops the driver-library link.
# GGML_NATIVE=OFF: the CPU part of the wheel must run on other machines too.
# Too long for CI (tens of minutes on 2 cores): see packaging/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

arch="80;86;89;90" out=dist/cuda jobs=$(nproc 2>/dev/null || echo 2) version=""
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch="${2//,/;}"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --version) version="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "build-cuda.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
fail() { echo "build-cuda.sh: $*" >&2; exit 2; }

py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
"$py" -m pip --version >/dev/null 2>&1 || fail "pip is missing for $py: it fetches the sources and cuBLAS"
if [ -z "$version" ]; then
  version=$("$py" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' 2>/dev/null \
            || echo 0.3.36)
fi

# The toolkit: $CUDA_HOME, /usr/local/cuda, or nvcc on PATH.
nvcc=""
for c in "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc "$(command -v nvcc || true)"; do
  [ -n "$c" ] && [ -x "$c" ] && { nvcc=$c; break; }
done
[ -n "$nvcc" ] || fail "no CUDA compiler (nvcc) found: install the CUDA toolkit, or set CUDA_HOME"
toolkit=$(cd "$(dirname "$nvcc")/.." && pwd)
command -v cmake >/dev/null || "$py" -c 'import cmake' 2>/dev/null \
  || fail "CMake is missing: pip install cmake (or apt-get install cmake)"
command -v c++ >/dev/null || fail "no C++ compiler (c++) found: apt-get install g++"
echo "build-cuda.sh: llama-cpp-python $version, CUDA $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm $arch, $jobs jobs"

# cuBLAS: the toolkit's own, else the nvidia-cublas wheel unpacked under build/cuda.
work=build/cuda
mkdir -p "$work" "$out"
cublas_inc="" cublas_lib=""
if [ -f "$toolkit/include/cublas_v2.h" ] && ls "$toolkit"/lib64/libcublas.so* >/dev/null 2>&1; then
  cublas_inc="$toolkit/include" cublas_lib="$toolkit/lib64"
else
  if [ ! -d "$work/cublas/nvidia" ]; then
    "$py" -m pip install --quiet --target "$work/cublas" nvidia-cublas \
      || fail "cuBLAS is not in the toolkit and 'pip install nvidia-cublas' failed"
  fi
  cublas_inc=$(dirname "$(find "$work/cublas/nvidia" -name cublas_v2.h | head -n 1)")
  cublas_lib=$(dirname "$(find "$work/cublas/nvidia" -name 'libcublas.so*' | head -n 1)")
  [ -d "$cublas_inc" ] && [ -d "$cublas_lib" ] || fail "the nvidia-cublas wheel has no headers or libraries"
fi

# One toolkit folder with cuBLAS in it. A copy, not symlinks: CMake finds the
# toolkit from where nvcc really is, so nvcc itself must live in this folder
# (hard links where the file system allows, so the copy costs no space).
root="$work/toolkit"
rm -rf "$root"
cp -al "$(readlink -f "$toolkit")" "$root" 2>/dev/null || cp -a "$(readlink -f "$toolkit")" "$root"
libdir="$root/lib64"
[ -d "$libdir" ] || libdir="$root/lib"
cp -a "$cublas_inc"/. "$root/include/"
cp -a "$cublas_lib"/. "$libdir/"
for lib in cublas cublasLt; do  # the wheel ships only the versioned names
  [ -e "$libdir/lib$lib.so" ] || ln -s "$(basename "$(ls "$libdir"/lib$lib.so.* | head -n 1)")" "$libdir/lib$lib.so"
done
root=$(cd "$root" && pwd)

t0=$(date +%s)
export CUDAToolkit_ROOT="$root" CUDACXX="$root/bin/nvcc" CMAKE_BUILD_PARALLEL_LEVEL="$jobs"
export CMAKE_ARGS="-DGGML_CUDA=on -DGGML_CUDA_NO_VMM=ON -DGGML_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=$arch -DCUDAToolkit_ROOT=$root"
"$py" -m pip wheel --no-deps --no-binary llama-cpp-python --no-cache-dir -w "$out" "llama-cpp-python==$version"
wheel=$(ls -t "$out"/llama_cpp_python-"$version"-*.whl | head -n 1)
mins=$(( ($(date +%s) - t0 + 59) / 60 ))
echo "build-cuda.sh: $wheel ($(du -h "$wheel" | cut -f1), built in ${mins} min)"
echo "build-cuda.sh: to run it, LD_LIBRARY_PATH=$(readlink -f "$cublas_lib"):$toolkit/lib64"
