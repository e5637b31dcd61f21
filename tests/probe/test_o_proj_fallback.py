"""Patch `dsv4-o-proj-bf16-fallback` changes forward math, so it is checked numerically on
CPU against an independent reference, and inside the vLLM release it patches (0.29.0)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from mtplint.patches.dsv4_o_proj_bf16 import _fallback, bf16_o_proj
from paths import ROOT, TESTS

SHAPES = dict(n_groups=2, heads_per_group=3, nope_dim=12, rope_dim=4, o_lora_rank=5)


def reference_o_proj(
    o, positions, angles, wo_a_weight, wo_b, *, n_groups, heads_per_group, nope_dim, rope_dim, o_lora_rank
):
    """DeepSeek-V4's reference O projection (inference/model.py): rotate the RoPE part of each
    head back with the conjugate of its complex frequency, then a grouped einsum with wo_a."""
    tokens, _, head_dim = o.shape
    freqs_cis = torch.polar(torch.ones_like(angles), angles)[positions]  # [T, rope/2]
    rope = torch.view_as_complex(o[..., nope_dim:].double().reshape(tokens, -1, rope_dim // 2, 2))
    rope = torch.view_as_real(rope * freqs_cis[:, None, :].conj().to(torch.complex128)).flatten(-2)
    x = torch.cat((o[..., :nope_dim].double(), rope), dim=-1)
    x = x.reshape(tokens, n_groups, heads_per_group * head_dim)
    w = wo_a_weight.double().view(n_groups, o_lora_rank, heads_per_group * head_dim)
    z = torch.einsum("bgd,grd->bgr", x, w)
    return wo_b(z.flatten(1).to(wo_b.weight.dtype))


def make_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    s = SHAPES
    head_dim = s["nope_dim"] + s["rope_dim"]
    heads = s["n_groups"] * s["heads_per_group"]
    o = torch.randn(4, heads, head_dim, generator=g).to(torch.bfloat16)
    positions = torch.tensor([0, 3, 7, 2])
    inv_freq = 1.0 / (10000 ** (torch.arange(0, s["rope_dim"], 2).float() / s["rope_dim"]))
    angles = torch.outer(torch.arange(16).float(), inv_freq)  # [max_pos, rope/2]
    cos_sin_cache = torch.cat((angles.cos(), angles.sin()), dim=-1)  # vLLM's layout: cos || sin
    wo_a = torch.nn.Linear(s["heads_per_group"] * head_dim, s["n_groups"] * s["o_lora_rank"], bias=False)
    wo_a.weight.data = torch.randn(wo_a.weight.shape, generator=g).to(torch.bfloat16)
    wo_b = torch.nn.Linear(s["n_groups"] * s["o_lora_rank"], 6, bias=False).to(torch.bfloat16)
    return o, positions, angles, cos_sin_cache, wo_a, wo_b


def test_bf16_fallback_matches_the_reference_o_projection():
    o, positions, angles, cache, wo_a, wo_b = make_inputs()
    got = bf16_o_proj(o, positions, cache, wo_a, wo_b, **SHAPES)
    want = reference_o_proj(o, positions, angles, wo_a.weight, wo_b, **SHAPES)
    assert got.shape == want.shape == (4, 6)
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=5e-2)


def test_the_comparison_would_catch_a_wrong_rotation():
    """Rotating forward instead of back (sin negated) must not pass the same tolerance."""
    o, positions, angles, cache, wo_a, wo_b = make_inputs(1)
    want = reference_o_proj(o, positions, angles, wo_a.weight, wo_b, **SHAPES)
    half = SHAPES["rope_dim"] // 2
    forward_cache = torch.cat((cache[:, :half], -cache[:, half:]), dim=-1)
    wrong = bf16_o_proj(o, positions, forward_cache, wo_a, wo_b, **SHAPES)
    assert not torch.allclose(wrong.float(), want.float(), rtol=2e-2, atol=5e-2)


def test_fp8_wo_a_keeps_vllms_own_path():
    calls = []

    def vllm_fp8_path(*args, **kwargs):
        calls.append(kwargs)
        return "fp8"

    patched = _fallback(vllm_fp8_path)
    o, positions, _, cache, wo_a, wo_b = make_inputs()
    wo_a.weight_scale_inv = torch.nn.Parameter(torch.ones(1), requires_grad=False)
    assert (
        patched(o, positions, cache, wo_a, wo_b, **SHAPES, einsum_recipe=(1, 128, 128), tma_aligned_scales=False)
        == "fp8"
    )
    assert calls and calls[0]["einsum_recipe"] == (1, 128, 128)
    del wo_a.weight_scale_inv
    assert patched(
        o, positions, cache, wo_a, wo_b, **SHAPES, einsum_recipe=(1, 128, 128), tma_aligned_scales=False
    ).shape == (4, 6)
    assert len(calls) == 1


IN_VLLM = r"""
import sys, torch
sys.path[:0] = sys.argv[1:]
from mtplint.probe.child import runtime_shim
runtime_shim.install((9, 0), "NVIDIA H100 80GB HBM3", 80 * 2**30)
import os
import vllm
import vllm.models.deepseek_v4.nvidia.ops.o_proj as ops
original = ops.deep_gemm_fp8_o_proj
os.environ["MTPLINT_PATCHES"] = "dsv4-o-proj-bf16-fallback"  # as `vllm serve` would get it
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.models.deepseek_v4.nvidia import flashmla  # imported after the patch: binds it
assert flashmla.deep_gemm_fp8_o_proj is ops.deep_gemm_fp8_o_proj is not original
assert ops.deep_gemm_fp8_o_proj._mtplint_original is original
from test_o_proj_fallback import SHAPES, make_inputs, reference_o_proj
o, positions, angles, cache, wo_a, wo_b = make_inputs(2)
got = flashmla.deep_gemm_fp8_o_proj(o, positions, cache, wo_a, wo_b, **SHAPES,
                                    einsum_recipe=(1, 128, 128), tma_aligned_scales=False)
want = reference_o_proj(o, positions, angles, wo_a.weight, wo_b, **SHAPES)
torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=5e-2)
print("vllm", vllm.__version__, "patched")
"""


@pytest.mark.probe
def test_patch_runs_in_the_vllm_release_it_targets():
    """Through vLLM 0.29.0's own plugin loading, then called where the attention backend
    calls it, with real CPU tensors."""
    from recorded_cases import release_env

    python = release_env("0.29.0") / "python"
    proc = subprocess.run(
        [str(python), "-c", IN_VLLM, str(Path(__file__).parent), str(TESTS / "support")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "vllm 0.29.0 patched" in proc.stdout
