#!/usr/bin/env bash
# Builds llama.cpp with the Vulkan backend (libllama, libggml*, libggml-vulkan)
# and its llama-bench from the llama.cpp tree vendored in the llama-cpp-python
# sdist the venv has (same commit as the engine), and caches the result:
#   ${XDG_CACHE_HOME:-~/.cache}/llamadesk/llama-vulkan/<version>-<cpu>/bin
#
#   packaging/build-vulkan.sh               build once, then print the cached bin folder
#   packaging/build-vulkan.sh --print       print the folder, build nothing (exit 1 if absent)
#   packaging/build-vulkan.sh --cli         also llama-cli (links llama.cpp's server code: ~20 min more)
#   packaging/build-vulkan.sh --jobs N      compile jobs (default 2, at nice 10)
#
# The Python package stays the CPU wheel's: llama-cpp-python loads these
# libraries instead of its own when LLAMA_CPP_LIB_PATH names the folder
#   LLAMA_CPP_LIB_PATH=<folder> llamadesk ask "hi" --gpu-layers -1
# (no second wheel build). Any Vulkan driver works: AMD and Intel (Mesa's RADV
# and ANV), NVIDIA's own, and Mesa's lavapipe (llvmpipe, a CPU-type device that
# ggml skips unless GGML_VK_VISIBLE_DEVICES names it; the tests set it).
#
# System packages (Debian names): mesa-vulkan-drivers vulkan-tools libvulkan-dev
# glslc glslang-tools spirv-headers. As root with apt-get the missing ones are
# installed (as .ci/run does for its own); otherwise the script says what to install.
#
# CPU side as portable as build-llama-tools' cache key allows: GGML_NATIVE=OFF
# with AVX2 (and AVX-512 where this CPU has it), AMX kernels off (this CPU's
# AMX repack kernels crash, llama.cpp#20824). First build ~5-15 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=2 print_only=0 cli=0
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --print) print_only=1; shift ;;
    --cli) cli=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "build-vulkan.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
fail() { echo "build-vulkan.sh: $*" >&2; exit 2; }
say() { echo "build-vulkan.sh: $*" >&2; }

. packaging/llama-version.sh
version=$(llama_version) \
  || fail "llama-cpp-python is not installed for $py: run the README's install command first"
cpu=$( (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m) | cksum | cut -d' ' -f1)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/llamadesk/llama-vulkan/$version-$cpu"
tools=(llama-bench)
[ "$cli" = 1 ] && tools+=(llama-cli)
libs=(libllama.so libggml.so libggml-base.so libggml-cpu.so libggml-vulkan.so)

have_all() {
  for t in "${tools[@]}"; do [ -x "$cache/bin/$t" ] || return 1; done
  for l in "${libs[@]}"; do [ -e "$cache/bin/$l" ] || return 1; done
}
if have_all; then echo "$cache/bin"; exit 0; fi
[ "$print_only" = 1 ] && { say "not built yet: $cache/bin"; exit 1; }

# System packages: install the missing ones as root on Debian, else say which.
pkgs=(mesa-vulkan-drivers vulkan-tools libvulkan-dev glslc glslang-tools spirv-headers)
if command -v dpkg >/dev/null; then
  missing=$(for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done | tr '\n' ' ')
  missing=${missing% }
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing the Vulkan build's system packages: $missing"
      apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2 \
        || fail "apt-get could not install: $missing"
    else
      fail "missing system packages: apt-get install $missing"
    fi
  fi
else
  for c in glslc glslangValidator; do
    command -v "$c" >/dev/null || fail "no $c: install the Vulkan SDK or your distribution's Vulkan headers, loader, glslc, glslang and SPIRV-Headers"
  done
fi
work="$cache.build"
say "llama.cpp (Vulkan) from llama-cpp-python $version: libllama, ${tools[*]}; $jobs jobs at nice 10"
build_prelude "$work" "$version"

# Old Vulkan headers. ggml_vk_instance_init builds a vk::LayerSettingsCreateInfoEXT
# (VK_EXT_layer_settings, Vulkan-Headers >= 1.3.261) to turn on the validation
# layer's best-practice checks; Debian 12 ships 1.3.239. That block only
# configures the validation layer (used in GGML_VULKAN_VALIDATE debug builds,
# never in this one): with older headers it is compiled out and the instance is
# created without it. Nothing the engine computes changes.
hdr=$(for d in /usr/include /usr/local/include ${VULKAN_SDK:+$VULKAN_SDK/include}; do
        [ -f "$d/vulkan/vulkan_core.h" ] && { echo "$d/vulkan/vulkan_core.h"; break; }; done; true)
hver=$( [ -z "$hdr" ] || sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\).*/\1/p' "$hdr" | head -n 1)
[ -n "$hver" ] || fail "no Vulkan headers (vulkan/vulkan_core.h): apt-get install libvulkan-dev"
if [ "$hver" -lt 261 ]; then
  say "the Vulkan headers are 1.3.$hver; ggml-vulkan's validation-layer settings (vk::LayerSettingEXT) need >= 1.3.261:" \
      "compiling that block only where VK_HEADER_VERSION >= 261 (validation layer settings only; no change to what runs)"
  "$py" packaging/vulkan_old_headers.py "$src/ggml/src/ggml-vulkan/ggml-vulkan.cpp" \
    || fail "could not apply the old-headers guard (the sources changed?)"
fi

# The CPU backend as build-llama-tools' users run it here: portable (GGML_NATIVE=OFF),
# AVX2/FMA/F16C, AVX-512 (VBMI, VNNI, BF16) where this CPU has them, AMX off.
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { case " $flags " in *" $1 "*) echo ON ;; *) echo OFF ;; esac; }
cm=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF "-DLLAMA_BUILD_SERVER=$([ "$cli" = 1 ] && echo ON || echo OFF)"
    -DGGML_VULKAN=ON -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    "-DGGML_BMI2=$(has bmi2)" "-DGGML_AVX512=$(has avx512f)" "-DGGML_AVX512_VBMI=$(has avx512vbmi)"
    "-DGGML_AVX512_VNNI=$(has avx512_vnni)" "-DGGML_AVX512_BF16=$(has avx512_bf16)"
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
    # RUNPATH $ORIGIN, not the build tree's (deleted): the cached libraries and tools find
    # one another in their folder, and LLAMA_CPP_LIB_PATH alone loads them.
    -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN')
start=$(date +%s)
nice -n 10 "$cmake" -S "$src" -B "$work/build" "${gen[@]}" "${cm[@]}" > "$work/configure.log" 2>&1 \
  || { tail -n 25 "$work/configure.log" >&2; fail "CMake configure failed (log: $work/configure.log)"; }
nice -n 10 "$cmake" --build "$work/build" -j "$jobs" --target llama "${tools[@]}" > "$work/build.log" 2>&1 \
  || { grep -m5 -B2 -A8 'error' "$work/build.log" >&2 || tail -n 25 "$work/build.log" >&2; fail "the build failed (log: $work/build.log)"; }
mkdir -p "$cache.new"
cp -a "$work/build/bin" "$cache.new/bin"
echo "llama-cpp-python $version, Vulkan headers 1.3.$hver, $(date -u +%FT%TZ), built in $(( $(date +%s) - start )) s" \
  > "$cache.new/BUILD-INFO"
rm -rf "$cache" && mv "$cache.new" "$cache" && rm -rf "$work"
say "built in $(( $(date +%s) - start )) s"
have_all || fail "the build finished without ${tools[*]} ${libs[*]}"
echo "$cache/bin"
