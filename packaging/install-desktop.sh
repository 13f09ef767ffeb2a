#!/bin/sh
# Adds this LlamaDesk bundle to your application menu, for your user only (no
# root): the .desktop entry with Exec pointing here, and the icons in the
# hicolor theme. Run it again after moving the folder. Remove with --uninstall.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
res="$here/_internal/resources"
entry="$data/applications/llamadesk.desktop"
sizes="16 32 48 64 128 256"
if [ "${1:-}" = "--uninstall" ]; then
  rm -f "$entry" "$data/icons/hicolor/scalable/apps/llamadesk.svg"
  for s in $sizes; do rm -f "$data/icons/hicolor/${s}x${s}/apps/llamadesk.png"; done
  echo "removed $entry"
  exit 0
fi
mkdir -p "$data/applications"
sed -e "s|^Exec=llamadesk|Exec=\"$here/llamadesk\"|" -e "s|^TryExec=llamadesk|TryExec=$here/llamadesk|" \
  "$res/llamadesk.desktop" > "$entry"
for s in $sizes; do
  mkdir -p "$data/icons/hicolor/${s}x${s}/apps"
  cp "$res/llamadesk-$s.png" "$data/icons/hicolor/${s}x${s}/apps/llamadesk.png"
done
mkdir -p "$data/icons/hicolor/scalable/apps"
cp "$res/llamadesk.svg" "$data/icons/hicolor/scalable/apps/llamadesk.svg"
command -v update-desktop-database >/dev/null && update-desktop-database "$data/applications" 2>/dev/null || true
echo "installed $entry"
