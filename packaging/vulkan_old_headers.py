"""The one guard packaging/build-vulkan.sh applies to ggml-vulkan.cpp for Vulkan headers older
than 1.3.261 (Debian 12 ships 1.3.239).

    python vulkan_old_headers.py path/to/ggml-vulkan.cpp

ggml_vk_instance_init builds a vk::LayerSettingsCreateInfoEXT (VK_EXT_layer_settings, in the
headers from 1.3.261) to turn on the validation layer's best-practice checks, which only a
GGML_VULKAN_VALIDATE debug build loads. This compiles that block only where
VK_HEADER_VERSION >= 261 and otherwise creates the instance with the same layers and
extensions and no layer settings. Nothing else in the file changes; if the block is not
exactly where it was expected (other sources), it changes nothing and exits 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

START = "    VkBool32 enable_best_practice = layer_settings;\n"
END = ("    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers,"
       " extensions, &layer_setting_info);\n")
FALLBACK = ("#else\n"
            "    // LlamaDesk packaging/build-vulkan.sh: headers older than 1.3.261 have no\n"
            "    // VK_EXT_layer_settings; only the validation layer's best-practice setting is lost.\n"
            "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers,"
            " extensions);\n"
            "#endif\n")


def guard(source: str) -> str:
    """`source` with the layer-settings block compiled only for headers >= 1.3.261."""
    if "#if VK_HEADER_VERSION >= 261\n" + START in source:
        return source  # already guarded
    i, j = source.find(START), source.find(END)
    if source.count(START) != 1 or source.count(END) != 1 or not 0 <= i < j:
        raise ValueError("the layer-settings block of ggml_vk_instance_init is not where it was expected")
    j += len(END)
    return source[:i] + "#if VK_HEADER_VERSION >= 261\n" + source[i:j] + FALLBACK + source[j:]


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    try:
        path.write_text(guard(path.read_text(encoding="utf-8")), encoding="utf-8")
    except (OSError, ValueError) as e:
        print(f"vulkan_old_headers.py: {path}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
