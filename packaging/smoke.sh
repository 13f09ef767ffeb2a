#!/usr/bin/env bash
# Smoke test of the Linux bundle as a user without Python runs it.
#
#   packaging/smoke.sh              build (packaging/build.sh), then test dist/llamadesk/
#   packaging/smoke.sh --no-build   test the dist/llamadesk/ already there
#
# Every bundle command runs under `env -i` with a fresh HOME and XDG dirs and a
# PATH with no Python on it, so anything the bundle still takes from the build
# machine's venv shows up here. jq (or the system python3) only reads the output.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
t_start=$(date +%s)

build=1
for a in "$@"; do
  case "$a" in
    --no-build) build=0 ;;
    *) echo "smoke.sh: unknown option: $a" >&2; exit 2 ;;
  esac
done
if [ "$build" = 1 ]; then
  packaging/build.sh
fi
t_built=$(date +%s)

bundle="$root/dist/llamadesk/llamadesk"
[ -x "$bundle" ] || { echo "smoke: no bundle at $bundle (run without --no-build)" >&2; exit 1; }
tmp=$(mktemp -d)
wpid=""
cleanup() { [ -n "$wpid" ] && kill -9 "$wpid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
mkdir -p "$tmp/empty-path"

secs_since() { local ms=$(( ($(date +%s%N) - $1) / 1000000 )); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }
fails=0 passes=0
ok() { echo "  ok   $1"; passes=$((passes + 1)); }
bad() { echo "  FAIL $1" >&2; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

# jq reads the output (the system's python3 where jq is missing, which only
# checks that it is JSON); neither is visible to the bundle.
if command -v jq >/dev/null; then
  jqq() { jq -e "$1" "$2" >/dev/null; }
else
  echo "smoke: jq not found; only checking that the output is JSON" >&2
  jqq() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$2"; }
fi

# A user's session with nothing of ours in it. $1 is the home to use.
as_user() {
  local home=$1; shift
  env -i HOME="$home" XDG_DATA_HOME="$home/.local/share" XDG_CONFIG_HOME="$home/.config" \
    XDG_CACHE_HOME="$home/.cache" XDG_STATE_HOME="$home/.local/state" XDG_RUNTIME_DIR="$home/run" \
    PATH="$tmp/empty-path" LANG=C.UTF-8 "$@"
}
u1="$tmp/user1"; mkdir -p "$u1/run"; chmod 700 "$u1/run"
models="$u1/.local/share/llamadesk/models"

echo "smoke: bundle $(du -sh "$root/dist/llamadesk" | cut -f1) at $root/dist/llamadesk"
check "no python on the bundle's PATH" as_user "$u1" /bin/sh -c '! command -v python3 && ! command -v python'
as_user "$u1" "$bundle" --version > "$tmp/version.txt" 2>&1 || true
check "--version" grep -q '^llamadesk [0-9]' "$tmp/version.txt"

t=$(date +%s%N)
as_user "$u1" "$bundle" models --json > "$tmp/models.json" 2> "$tmp/models.err" || bad "models --json exit code"
echo "  ..   models --json (first run: assembles the default model) took $(secs_since "$t") s"
check "models --json lists the default model" jqq \
  "any(.[]; .architecture == \"gemma3\" and .error == null and (.path | startswith(\"$models\")))" \
  "$tmp/models.json"
check "default model assembled in the user models dir, not in the bundle" \
  test -f "$models/.gemma-3-270m-q4_k_m.gguf.verified"
check "the bundle holds no assembled model" sh -c "! find '$root/dist/llamadesk' -name '*.gguf' | grep -q ."

t=$(date +%s%N)
as_user "$u1" "$bundle" ask "hi" --json --max-tokens 8 > "$tmp/ask.json" 2> "$tmp/ask.err" || bad "ask exit code"
echo "  ..   ask --json took $(secs_since "$t") s"
check "ask --json answers with stats and a saved conversation" jqq \
  '(.text | type == "string") and .stats.decode_tokens >= 1 and (.conversation | type == "number")' \
  "$tmp/ask.json"

mkdir -p "$tmp/elsewhere"
ln "$models/gemma-3-270m-q4_k_m.gguf" "$tmp/elsewhere/copy.gguf"
as_user "$u1" "$bundle" ask "hi" --json --no-save --max-tokens 4 --model "$tmp/elsewhere/copy.gguf" \
  > "$tmp/ask2.json" 2> "$tmp/ask2.err" || bad "ask --model exit code"
check "ask --model PATH uses that file" jqq ".model == \"$tmp/elsewhere/copy.gguf\"" "$tmp/ask2.json"
as_user "$u1" "$bundle" models --json "$tmp/elsewhere" > "$tmp/models2.json" 2>/dev/null || true
check "models PATH lists extra folders" jqq "length == 2" "$tmp/models2.json"
as_user "$u1" "$bundle" ask "" > /dev/null 2> "$tmp/err.txt" && bad "empty prompt accepted" || true
check "a user error is one line, not a traceback" sh -c "! grep -q Traceback '$tmp/err.txt' && grep -q 'error:' '$tmp/err.txt'"

# The window, offscreen, on a fresh home: it must assemble the default model
# itself, stay up, and close cleanly on Ctrl+C (SIGINT closes it like the user would).
u2="$tmp/user2"; mkdir -p "$u2/run"; chmod 700 "$u2/run"
t=$(date +%s%N)
# Not through the as_user function: `func &` forks a subshell, and SIGINT would
# reach that subshell instead of the window.
env -i HOME="$u2" XDG_DATA_HOME="$u2/.local/share" XDG_CONFIG_HOME="$u2/.config" \
  XDG_CACHE_HOME="$u2/.cache" XDG_STATE_HOME="$u2/.local/state" XDG_RUNTIME_DIR="$u2/run" \
  PATH="$tmp/empty-path" LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen "$bundle" > "$tmp/window.log" 2>&1 &
wpid=$!
alive=1
for _ in $(seq 1 80); do
  sleep 0.1
  kill -0 "$wpid" 2>/dev/null || { alive=0; break; }
done
stamp="$u2/.local/share/llamadesk/models/.gemma-3-270m-q4_k_m.gguf.verified"
for _ in $(seq 1 100); do [ -f "$stamp" ] && break; sleep 0.1; done
check "window stays up for 8 s" test "$alive" = 1
check "window assembled the default model on first start" test -f "$stamp"
kill -INT "$wpid" 2>/dev/null || true
rc=0
for _ in $(seq 1 100); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$wpid" 2>/dev/null; then bad "window still running 10 s after Ctrl+C"; kill -9 "$wpid"; fi
wait "$wpid" || rc=$?
wpid=""
echo "  ..   window ran $(secs_since "$t") s"
check "window exits 0 after Ctrl+C" test "$rc" = 0
check "window loaded the model (llama.cpp's context log)" \
  grep -q "llama_context: *n_ctx" "$u2/.local/state/llamadesk/log/llamadesk.log"
check "window wrote its settings" test -f "$u2/.config/llamadesk/settings.json"
check "window printed no traceback" sh -c "! grep -q Traceback '$tmp/window.log'"

check "install-desktop.sh adds the menu entry and icons" \
  env -i HOME="$u1" PATH=/usr/bin:/bin /bin/sh "$root/dist/llamadesk/install-desktop.sh"
if command -v desktop-file-validate >/dev/null; then
  check "installed .desktop entry validates" desktop-file-validate "$u1/.local/share/applications/llamadesk.desktop"
fi

t_end=$(date +%s)
echo "smoke: build $((t_built - t_start)) s, tests $((t_end - t_built)) s, total $((t_end - t_start)) s"
# Worded so CI does not mistake it for the test runner's closing line.
if [ "$fails" = 0 ]; then echo "smoke: all $passes checks passed"; else echo "smoke: $fails of $((passes + fails)) checks FAILED"; fi
if [ "$fails" != 0 ]; then
  for f in models.err ask.err window.log; do [ -s "$tmp/$f" ] && { echo "--- $f"; tail -20 "$tmp/$f"; }; done
  exit 1
fi
