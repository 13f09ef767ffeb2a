# Sourced by the packaging scripts: the Python that runs LlamaDesk here, and its llama-cpp-python.
#
#   py               .venv/bin/python if the README's install made one, else python3
#   llama_version    the installed llama-cpp-python version; prints nothing when it is absent

py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python

llama_version() {
  "$py" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' 2>/dev/null
}

# build_prelude WORKDIR VERSION: what build-llama-tools.sh and build-vulkan.sh both need before
# CMake: a C++ compiler, CMake (pip's, when the system has none) and Ninja where there is one,
# and llama.cpp's sources as vendored in that llama-cpp-python sdist (the engine's own commit),
# with LlamaDesk's fixes applied (packaging/llama_patches.py, the one place they are made).
# Sets cmake, gen (the generator arguments) and src; calls fail() when it cannot.
build_prelude() {
  local work=$1 version=$2
  command -v c++ >/dev/null || fail "no C++ compiler (c++) found: apt-get install g++"
  cmake=$(command -v cmake || true)
  if [ -z "$cmake" ]; then
    "$py" -m pip install -q cmake ninja || fail "CMake is missing and pip could not install it"
    cmake="$(dirname "$py")/cmake"
  fi
  gen=()
  command -v ninja >/dev/null || [ -x "$(dirname "$py")/ninja" ] && gen=(-G Ninja)
  [ -x "$(dirname "$py")/ninja" ] && export PATH="$(cd "$(dirname "$py")" && pwd):$PATH"
  rm -rf "$work" && mkdir -p "$work"
  "$py" -m pip download -q --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$version" >&2 \
    || fail "could not fetch the llama-cpp-python $version sources from PyPI"
  tar xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
  src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
  "$py" packaging/llama_patches.py "$src" || fail "could not apply packaging/llama_patches.py"
}
