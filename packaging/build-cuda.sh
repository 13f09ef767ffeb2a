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

. packaging/llama-version.sh
"$py" -m pip --version >/dev/null 2>&1 || fail "pip is missing for $py: it fetches the sources and cuBLAS"
if [ -z "$version" ]; then
  version=$(llama_version || echo 0.3.36)
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

# One toolkit folder with cuBLAS in it (packaging/cuda-toolkit.sh).
work=build/cuda
mkdir -p "$work" "$out"
. packaging/cuda-toolkit.sh
toolkit_with_cublas "$toolkit" "$work" "$py"

t0=$(date +%s)
export CUDAToolkit_ROOT="$root" CUDACXX="$root/bin/nvcc" CMAKE_BUILD_PARALLEL_LEVEL="$jobs"
export CMAKE_ARGS="-DGGML_CUDA=on -DGGML_CUDA_NO_VMM=ON -DGGML_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=$arch -DCUDAToolkit_ROOT=$root"
"$py" -m pip wheel --no-deps --no-binary llama-cpp-python --no-cache-dir -w "$out" "llama-cpp-python==$version"
wheel=$(ls -t "$out"/llama_cpp_python-"$version"-*.whl | head -n 1)
mins=$(( ($(date +%s) - t0 + 59) / 60 ))
echo "build-cuda.sh: $wheel ($(du -h "$wheel" | cut -f1), built in ${mins} min)"
echo "build-cuda.sh: to run it, LD_LIBRARY_PATH=$(readlink -f "$cublas_lib"):$toolkit/lib64"
