#!/usr/bin/env bash
# Builds llama.cpp's own tools (llama-server, llama-bench, llama-batched-bench,
# llama-quantize) from the llama.cpp tree vendored in the llama-cpp-python sdist,
# so they are the same commit as the engine LlamaDesk runs, and caches them.
#
#   packaging/build-llama-tools.sh              build once, then print the cached bin folder
#   packaging/build-llama-tools.sh --print      print the folder, build nothing (exit 1 if absent)
#   packaging/build-llama-tools.sh --jobs N     compile jobs (all cores)
#
# The tests run llama-server as a real remote engine and llama-bench as the C++
# ceiling; they find the binaries through LLAMADESK_LLAMA_TOOLS or this cache:
#   ${XDG_CACHE_HOME:-~/.cache}/llamadesk/llama-tools/<version>-<cpu>-<fixes>/bin
# keyed by the llama-cpp-python version, a hash of the CPU's feature flags
# (GGML_NATIVE tunes the binaries to this CPU) and the tag of LlamaDesk's fixes to
# the sources (packaging/llama_patches.py). The first build takes ~25-30 min on
# 2 cores; later runs cost nothing.
#
# The same folder holds libllama and ggml's libraries with the fixes (RUNPATH
# $ORIGIN): on a CPU with AMX the engine loads them instead of pip's unpatched
# build (app/engine/library_choice.py), so the AMX kernels run in the app too.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc 2>/dev/null || echo 2) print_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --print) print_only=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "build-llama-tools.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
fail() { echo "build-llama-tools.sh: $*" >&2; exit 2; }

. packaging/llama-version.sh
version=$(llama_version) \
  || fail "llama-cpp-python is not installed for $py: run the README's install command first"
cpu=$( (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m) | cksum | cut -d' ' -f1)
fixes=$("$py" packaging/llama_patches.py --id)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/llamadesk/llama-tools/$version-$cpu-$fixes"
tools=(llama-server llama-bench llama-batched-bench llama-quantize)

have_all() { for t in "${tools[@]}"; do [ -x "$cache/bin/$t" ] || return 1; done; }
if have_all; then echo "$cache/bin"; exit 0; fi
[ "$print_only" = 1 ] && { echo "build-llama-tools.sh: not built yet: $cache/bin" >&2; exit 1; }

work="$cache.build"
echo "build-llama-tools.sh: llama.cpp from llama-cpp-python $version, ${tools[*]}, $jobs jobs" >&2
build_prelude "$work" "$version"
start=$(date +%s)
"$cmake" -S "$src" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN' >&2
"$cmake" --build "$work/build" -j "$jobs" --target "${tools[@]}" >&2
# RUNPATH $ORIGIN: the tools and libllama find ggml's libraries beside them.
mkdir -p "$cache.new"
cp -a "$work/build/bin" "$cache.new/bin"
"$py" packaging/llama_patches.py --mark "$cache.new/bin"
rm -rf "$cache" && mv "$cache.new" "$cache" && rm -rf "$work"
echo "build-llama-tools.sh: built in $(( $(date +%s) - start )) s" >&2
have_all || fail "the build finished without ${tools[*]}"
echo "$cache/bin"
