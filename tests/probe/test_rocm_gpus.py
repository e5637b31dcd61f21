"""AMD GPUs in --gpu: the GPU table, its usage errors, and vLLM's own ROCm platform in the probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.core.errors import BadInput
from mtplint.pipeline.gpus import GPUS, resolve
from mtplint.probe.runner import ProbeRequest

from fixtures.build import cached_build

MTPLINT = [sys.executable, "-m", "mtplint"]


@pytest.mark.parametrize(
    ("name", "arch", "sm"),
    [("mi300x", "gfx942", (9, 4)), ("MI325X", "gfx942", (9, 4)), ("AMD-Instinct-MI355X", "gfx950", (9, 5))],
)
def test_an_amd_gpu_resolves_to_its_gfx_arch(name, arch, sm):
    gpu = resolve(name, None)
    assert (gpu.arch, gpu.sm, gpu.rocm) == (arch, sm, True)
    assert gpu.name.startswith("AMD Instinct MI3")


def test_nvidia_gpus_stay_cuda():
    assert not any(g.arch for g in GPUS.values() if g.name.startswith("NVIDIA"))
    assert resolve(None, "9.0").arch == ""


def test_an_unknown_amd_name_lists_the_amd_gpus():
    with pytest.raises(BadInput) as err:
        resolve("mi250x", None)
    assert "'mi250x': unknown" in str(err.value)
    assert "AMD mi300x, mi325x, mi355x" in str(err.value)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950", "MI300X"])
def test_sm_is_nvidia_only_and_says_how_to_name_an_amd_gpu(arch):
    with pytest.raises(BadInput) as err:
        resolve(None, arch)
    message = str(err.value)
    assert "NVIDIA compute capability" in message
    assert "--gpu" in message and "mi300x (gfx942)" in message and "mi355x (gfx950)" in message


def test_the_probe_key_of_an_nvidia_gpu_is_what_it_was_and_an_amd_one_carries_its_arch(monkeypatch):
    monkeypatch.setenv("VLLM_ROCM_USE_AITER", "1")
    nvidia = ProbeRequest(sm=[9, 0], gpu_name="h100", gpu_memory=80).key_fields()
    assert "arch" not in nvidia and "rocm_env" not in nvidia
    amd = ProbeRequest(sm=[9, 4], gpu_name="mi300x", gpu_memory=192, arch="gfx942").key_fields()
    assert amd["arch"] == "gfx942"
    assert amd["rocm_env"] == {"VLLM_ROCM_USE_AITER": "1"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--gpu", "mi250x"], ["mi250x", "AMD mi300x"]),
        (["--sm", "gfx942"], ["--sm 'gfx942'", "NVIDIA compute capability", "mi300x (gfx942)"]),
    ],
)
def test_amd_usage_errors_are_one_line_exit_2(tmp_path, args, needles):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    proc = subprocess.run([*MTPLINT, str(tmp_path), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    for needle in needles:
        assert needle in line, line


# vLLM's decisions, read from its own RocmPlatform after the shim answered only device queries.
_PLATFORM = """
import json, sys, torch
from mtplint.probe.child import runtime_shim
runtime_shim.install_native_stubs()
runtime_shim.install_op_fallbacks()
runtime_shim.install_cuda_inert_objects()
name = {"gfx942": "AMD Instinct MI300X", "gfx950": "AMD Instinct MI355X"}[sys.argv[1]]
sm = {"gfx942": (9, 4), "gfx950": (9, 5)}[sys.argv[1]]
runtime_shim.install_rocm_platform(sys.argv[1], sm, name, 192 << 30, 8)
from vllm.platforms import current_platform as p
from vllm.platforms import rocm
print(json.dumps({
    "rocm": p.is_rocm(), "cuda": p.is_cuda(), "vllm_class": isinstance(p, rocm.RocmPlatform),
    "capability": list(p.get_device_capability()), "name": p.get_device_name(),
    "fp8": str(p.fp8_dtype()), "fnuz": p.is_fp8_fnuz(), "mx": p.supports_mx(),
    "cdna": rocm.get_cdna_version(), "gfx942": rocm.on_gfx942(), "gfx950": rocm.on_gfx950(),
}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arch", "expected"),
    [
        ("gfx942", {"capability": [9, 4], "fp8": "torch.float8_e4m3fnuz", "fnuz": True, "mx": False, "cdna": 3}),
        ("gfx950", {"capability": [9, 5], "fp8": "torch.float8_e4m3fn", "fnuz": False, "mx": True, "cdna": 4}),
    ],
)
def test_vllm_own_rocm_platform_decides_from_the_gfx_arch(arch, expected):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    env.pop("HIP_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", _PLATFORM, arch], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["rocm"] and not seen["cuda"] and seen["vllm_class"]
    assert seen["gfx942"] == (arch == "gfx942") and seen["gfx950"] == (arch == "gfx950")
    assert {k: seen[k] for k in expected} == expected


def _check(cache: Path, argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MTPLINT_CACHE_DIR": str(cache), **(env or {})}
    cmd = [*MTPLINT, "check", "-q", "--format", "json", "--fail-on", "error", "--gpu", "mi300x", "--", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


@pytest.mark.probe
@pytest.mark.slow
def test_the_amd_deepseek_recipe_with_aiter_exported_is_steps_not_checked_not_a_construction_error(tmp_path):
    """vLLM's recipe for DeepSeek-R1/V3 on MI300X (recipes 8959cf6, "TP8+EP - ROCm") exports
    VLLM_ROCM_USE_AITER=1 and VLLM_ROCM_USE_AITER_MOE=1. The probe has no aiter: vLLM would pick
    its AITER FP8 MoE and refuse it ("AITER MoE is not enabled"), a false MTP009. The run without
    AITER is replayed and the AITER step said not checked; the variable is part of the probe key."""
    ckpt = str(cached_build("dsv3-fp8-official"))
    argv = ["vllm", "serve", ckpt, "--trust-remote-code", "--tensor-parallel-size", "8", "--enable-expert-parallel"]
    argv += ["--speculative-config", '{"method":"mtp","num_speculative_tokens":1}']
    codes = lambda proc: sorted(f["code"] for f in json.loads(proc.stdout)["findings"])  # noqa: E731
    plain = _check(tmp_path / "cache", argv)
    assert plain.returncode == 0, plain.stderr
    assert codes(plain) == ["MTP016", "MTP025"]  # MTP025: the MLA prefill backend's flash-attn
    aiter = _check(tmp_path / "cache", argv, env={"VLLM_ROCM_USE_AITER": "1", "VLLM_ROCM_USE_AITER_MOE": "1"})
    assert aiter.returncode == 0, aiter.stderr
    assert codes(aiter) == ["MTP016", "MTP025", "MTP025"], aiter.stdout
    messages = [f["message"] for f in json.loads(aiter.stdout)["findings"]]
    assert any("VLLM_ROCM_USE_AITER=1" in m and "lacks aiter" in m for m in messages), messages
    # The recipe as written on one line: the assignments before `vllm serve` are the server's environment.
    prefixed = _check(tmp_path / "cache", ["VLLM_ROCM_USE_AITER=1", "VLLM_ROCM_USE_AITER_MOE=1", *argv])
    assert prefixed.returncode == 0, prefixed.stderr
    assert [f["message"] for f in json.loads(prefixed.stdout)["findings"]] == messages
