#!/usr/bin/env bash
# Prepares what packaging/gpu-check.sh needs on a GPU machine that can download
# nothing and receives at most 64 MiB: the llama-cpp-python sdist trimmed of
# what a CUDA build does not read, and the two pure-Python wheels LlamaDesk's
# command line needs that the device image lacks.
#
#   packaging/prepare-gpu-check.sh            writes build/gpu-check/ (prints its size)
#
# Then, on the device:  bash packaging/gpu-check.sh      (carry: build/gpu-check)
# and here, to rehearse: bash packaging/gpu-check.sh --rehearse
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "prepare-gpu-check.sh: $*" >&2; exit 2; }

. packaging/llama-version.sh
version=$(llama_version \
          || echo 0.3.36)
out=build/gpu-check
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out" && mkdir -p "$out/wheels"

"$py" -m pip download -q --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$version" \
  || fail "could not fetch the llama-cpp-python $version sources"
tar xzf "$tmp"/llama_cpp_python-"$version".tar.gz -C "$tmp"
src="$tmp/llama_cpp_python-$version"
full=$(du -sm "$src" | cut -f1)
# What a CUDA build of libllama and llama-bench never reads: the git history
# the sdist carries, vocab test models, docs, images and media, the web UI and
# server (LLAMA_BUILD_SERVER=OFF), tests and examples (their options off), and
# the other GPU backends' sources.
v="$src/vendor/llama.cpp"
rm -rf "$v"/models "$v"/docs "$v"/media "$v"/benches "$v"/tests "$v"/examples "$v"/.devops \
       "$v"/tools/ui "$v"/tools/server "$v"/tools/cli \
       "$src"/examples "$src"/docs "$src"/tests "$src"/docker
for b in sycl vulkan opencl hexagon metal et cann musa hip kompute webgpu zdnn openvino virtgpu; do
  rm -rf "$v/ggml/src/ggml-$b"
done
rm -rf "$src"/.git "$v"/.git
find "$v" \( -name '*.mp4' -o -name '*.jpg' -o -name '*.png' -o -name '*.wav' -o -name '*.gif' \) -delete
# gguf-py stays: gpu_check_model.py writes the random-weight model with it.
tar czf "$out/llama-cpp-python-$version-trimmed.tar.gz" -C "$tmp" "llama_cpp_python-$version"
echo "$version" > "$out/VERSION"

# The device image has numpy, jinja2, psutil, markdown-it-py and pygments; not these.
"$py" -m pip download -q --no-deps --only-binary :all: -d "$out/wheels" diskcache platformdirs \
  || fail "could not fetch the diskcache and platformdirs wheels"

echo "prepare-gpu-check.sh: sources $full MiB -> $(du -sm "$src" | cut -f1) MiB trimmed," \
     "$(du -h "$out/llama-cpp-python-$version-trimmed.tar.gz" | cut -f1) compressed;" \
     "$out is $(du -sh "$out" | cut -f1) (the device carries 64 MiB with the work tree)"
