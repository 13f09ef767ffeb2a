"""packaging/build-vulkan.sh without building: its options, and the one guard it applies to
ggml-vulkan.cpp for old Vulkan headers (the built result is tested in tests/gpu)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
sys.path.insert(0, str(PACKAGING))
import vulkan_old_headers as guard  # noqa: E402

INIT = (
    "    std::vector<const char*> extensions;\n"
    f"{guard.START}"
    "    std::vector<vk::LayerSettingEXT> settings = {\n"
    "        {\"VK_LAYER_KHRONOS_validation\", \"validate_best_practices\",\n"
    "         vk::LayerSettingTypeEXT::eBool32, 1, &enable_best_practice},\n"
    "    };\n"
    "    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);\n"
    f"{guard.END}"
    "    vk_instance.instance = vk::createInstance(instance_create_info);\n"
)


@pytest.mark.parametrize("script", ["build-vulkan.sh", "gpu-check.sh"])
def test_the_scripts_parse_and_are_executable(script):
    path = PACKAGING / script
    assert path.stat().st_mode & 0o111, f"{script} is not executable"
    out = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_build_vulkan_says_how_to_use_it_and_refuses_what_it_does_not_know():
    script = str(PACKAGING / "build-vulkan.sh")
    usage = subprocess.run(["bash", script, "--help"], capture_output=True, text=True)
    assert usage.returncode == 0
    assert "LLAMA_CPP_LIB_PATH" in usage.stdout and "GGML_VK_VISIBLE_DEVICES" in usage.stdout
    assert "glslang-tools spirv-headers" in usage.stdout
    bad = subprocess.run(["bash", script, "--cuda"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "build-vulkan.sh: unknown option: --cuda (see --help)"]


def test_the_old_headers_guard_compiles_only_the_layer_settings_block_conditionally():
    out = guard.guard("before\n" + INIT + "after\n")
    lines = out.splitlines(keepends=True)
    at = lines.index("#if VK_HEADER_VERSION >= 261\n")
    assert lines[at + 1] == guard.START
    assert "".join(lines[:at]) == "before\n    std::vector<const char*> extensions;\n"
    els, end = lines.index("#else\n"), lines.index("#endif\n")
    assert lines[els - 1] == guard.END  # the new-headers path is the original, untouched
    fallback = "".join(lines[els + 1:end])
    assert "LayerSetting" not in fallback.replace("VK_EXT_layer_settings", "")
    assert "instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);" in fallback
    tail = "    vk_instance.instance = vk::createInstance(instance_create_info);\nafter\n"
    assert "".join(lines[end + 1:]) == tail
    # Removing what it added gives back the sources exactly; a second pass changes nothing.
    assert guard.guard(out) == out
    undone = out.replace("#if VK_HEADER_VERSION >= 261\n", "").replace(guard.FALLBACK, "")
    assert undone == "before\n" + INIT + "after\n"


def test_the_guard_changes_nothing_when_the_sources_are_not_as_expected(tmp_path):
    f = tmp_path / "ggml-vulkan.cpp"
    f.write_text(INIT.replace("&layer_setting_info", "&other"))
    r = subprocess.run([sys.executable, str(PACKAGING / "vulkan_old_headers.py"), str(f)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "not where it was expected" in r.stderr
    assert f.read_text() == INIT.replace("&layer_setting_info", "&other")
