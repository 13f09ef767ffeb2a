# Sourced by build-cuda.sh and gpu-check.sh: a CUDA toolkit folder CMake can
# build llama.cpp with, cuBLAS included.
#
#   toolkit_with_cublas TOOLKIT WORKDIR PYTHON
# sets root (the folder to give CMake as CUDAToolkit_ROOT) and cublas_lib (the
# folder with libcublas.so*, for LD_LIBRARY_PATH at run time); calls fail() when
# it cannot.
#
# NVIDIA's PyPI toolkit wheels have no cuBLAS: it comes from the nvidia-cublas
# wheel, already installed for PYTHON or else pip-installed under WORKDIR, and
# is merged with the toolkit into one folder. A copy, not symlinks: CMake finds
# the toolkit from where nvcc really is, so nvcc must live in that folder too
# (hard links where the file system allows, so the copy costs no space).

toolkit_with_cublas() {
  local toolkit=$1 work=$2 py=$3 cublas_inc="" libdir lib site
  cublas_lib=""
  if [ -f "$toolkit/include/cublas_v2.h" ] && ls "$toolkit"/lib64/libcublas.so* >/dev/null 2>&1; then
    root=$(cd "$toolkit" && pwd) cublas_lib="$root/lib64"
    return 0
  fi
  site=$("$py" -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null || true)
  if [ -n "$site" ] && [ -n "$(find "$site/nvidia" -name cublas_v2.h 2>/dev/null | head -n 1)" ]; then
    cublas_inc=$(dirname "$(find "$site/nvidia" -name cublas_v2.h | head -n 1)")
    cublas_lib=$(dirname "$(find "$site/nvidia" -name 'libcublas.so*' | head -n 1)")
  else
    if [ ! -d "$work/cublas/nvidia" ]; then
      "$py" -m pip install --quiet --target "$work/cublas" nvidia-cublas \
        || fail "cuBLAS is not in the toolkit, not installed for $py, and 'pip install nvidia-cublas' failed"
    fi
    cublas_inc=$(dirname "$(find "$work/cublas/nvidia" -name cublas_v2.h | head -n 1)")
    cublas_lib=$(dirname "$(find "$work/cublas/nvidia" -name 'libcublas.so*' | head -n 1)")
  fi
  [ -d "$cublas_inc" ] && [ -d "$cublas_lib" ] || fail "the nvidia-cublas wheel has no headers or libraries"

  root="$work/toolkit"
  mkdir -p "$work"
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
}
