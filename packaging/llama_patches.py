"""The fixes LlamaDesk applies to llama.cpp's vendored sources before building them.

One place for every build of llama.cpp this project makes (packaging/llama-version.sh's
build_prelude runs it): llama.cpp's own tools and the engine libraries built beside them
(build-llama-tools.sh), and the Vulkan build. The folder a build caches gets a file named
MARKER listing the fixes it has, which the engine reads (app/engine/library_choice.py) before
it trusts a kernel a fix repairs.

    python packaging/llama_patches.py SRC       apply every fix to the llama.cpp tree SRC
    python packaging/llama_patches.py --id      the tag of this set of fixes (part of cache keys)
    python packaging/llama_patches.py --mark D  write D/MARKER: the libraries in D have the fixes

A fix whose original text is not found fails the build with one line: the sources moved on and
the fix must be looked at again, never silently skipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

MARKER = "LLAMADESK-PATCHES"
PATCH_ID = "amx1"

# ggml-cpu's AMX kernel builds its tile configuration on the stack and hands it to
# _tile_loadconfig. GCC 12's intrinsic declares a read of 8 bytes only, so the stores of the rows
# and column widths are dropped as dead: every tile stays unconfigured and the first tileloadd
# raises SIGILL (llama.cpp #20824, PR #26954). A constexpr config lives in .rodata, whole. The
# PR also asks for tile data per worker thread; Linux grants it per process, but a worker may
# run before the buffer type asked, and asking again costs one syscall per thread.
AMX_CONFIG_LINES = """    tc.palette_id = 1;
    tc.start_row = 0;
    tc.rows[0] = 8;   tc.colsb[0] = 64;
    tc.rows[1] = 8;   tc.colsb[1] = 64;
    tc.rows[2] = 16;  tc.colsb[2] = 32;
    tc.rows[3] = 16;  tc.colsb[3] = 32;
    tc.rows[4] = 16;  tc.colsb[4] = 64;
    tc.rows[5] = 16;  tc.colsb[5] = 64;
    tc.rows[6] = 16;  tc.colsb[6] = 64;
    tc.rows[7] = 16;  tc.colsb[7] = 64;
"""
AMX_OLD = f"""    alignas(64) tile_config_t tc = {{}};
{AMX_CONFIG_LINES}
    _tile_loadconfig(&tc);
    done = true;
}}
"""
AMX_NEW = """#if defined(__gnu_linux__)
    syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */);
#endif
    _tile_loadconfig(&ggml_amx_tile_config);
    done = true;
}
"""
AMX_CONFIG = f"""// LlamaDesk (packaging/llama_patches.py): in .rodata, so no store to it can be dropped.
alignas(64) static constexpr tile_config_t ggml_amx_tile_config = [] {{
    tile_config_t tc = {{}};
{AMX_CONFIG_LINES}    return tc;
}}();

inline void ggml_tile_config_init(void) {{
"""

# (file under the llama.cpp tree, original text, replacement): applied in order.
PATCHES = [
    ("ggml/src/ggml-cpu/amx/mmq.cpp", AMX_OLD, AMX_NEW),
    ("ggml/src/ggml-cpu/amx/mmq.cpp", "inline void ggml_tile_config_init(void) {\n", AMX_CONFIG),
]


def apply(src: Path) -> None:
    for rel, old, new in PATCHES:
        path = src / rel
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"llama_patches.py: {rel} changed: the {PATCH_ID} fix no longer applies; "
                             "look at it again")
        path.write_text(text.replace(old, new))


def main(argv: list[str]) -> int:
    if argv == ["--id"]:
        print(PATCH_ID)
        return 0
    if len(argv) == 2 and argv[0] == "--mark":
        Path(argv[1], MARKER).write_text(PATCH_ID + "\n")
        return 0
    if len(argv) != 1 or not Path(argv[0], "ggml").is_dir():
        print("usage: llama_patches.py SRC (a llama.cpp tree) | --id | --mark DIR", file=sys.stderr)
        return 2
    apply(Path(argv[0]))
    print(f"llama_patches.py: applied {PATCH_ID} (the AMX tile configuration in .rodata)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
