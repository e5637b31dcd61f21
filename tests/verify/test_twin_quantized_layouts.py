"""`mtplint twin` on quantized exports (the layouts scripts/twin_sweep.py measures): every leaf of
a module the twin stores as zeros keeps its format's granularity, so vLLM's own load accepts it."""

from __future__ import annotations

from mtplint.inventory.checkpoint import load_inventory
from mtplint.inventory.fingerprint import group_modules
from mtplint.twin import build as twin_build
from mtplint.twin import shrink

from fixtures.build import cached_build


def _twin_module(recipe: str, module: str) -> dict[str, tuple[int, ...]]:
    inv = load_inventory(cached_build(recipe))
    p = shrink.plan(inv.config)
    p.guess = bool(p.ambiguous)
    leaves = group_modules(inv.tensors.values())[module]
    out = twin_build._module_tensors(module, leaves, p, False, twin_build._num_bits(inv.config), [])
    return {name.rsplit(".", 1)[-1]: tuple(t.shape) for name, t in out.items()}


def test_nvfp4_expert_group_scales_keep_their_16_wide_groups():
    """nvidia/DeepSeek-V4-Flash-NVFP4's experts: weight U8 [out, in/2], weight_scale [out, in/16].
    The twin stores NVFP4 as zeros; on main each leaf was shrunk by value, and the scale's in/16 =
    256 (hidden 4096) is the kept expert count, so it stayed 256 where vLLM's w13_weight_scale
    holds 512 / 16 = 32 (768 load errors: the four V4-Flash NVFP4 fixtures had no twin)."""
    shapes = _twin_module("dsv4-flash-nvfp4", "layers.0.ffn.experts.0.w1")
    out, half_in = shapes["weight"]
    assert half_in == 256  # hidden 512, two codes a byte
    assert shapes["weight_scale"] == (out, 512 // 16)
    assert shapes["weight_scale_2"] == () and shapes["input_scale"] == ()
    down = _twin_module("dsv4-flash-nvfp4", "layers.0.ffn.experts.0.w2")
    assert down["weight_scale"] == (512, down["weight"][1] * 2 // 16)


def test_packed_fp4_weights_shrink_as_their_logical_shape():
    """ModelOpt NVFP4 GLM-5: a packed U8 weight [out, in/2] was shrunk by value, and 6144 / 2 =
    3072 met a kept config size, so the twin held 3072-wide codes where vLLM builds in/2 = 128:
    a 600 MB twin whose load failed (4 shape errors in the probe; now 31 MB, 0)."""
    o_proj = _twin_module("glm5-nvfp4-mtp-head-excluded", "model.layers.0.self_attn.o_proj")
    up = _twin_module("glm5-nvfp4-mtp-head-excluded", "model.layers.3.mlp.experts.0.up_proj")
    assert o_proj["weight"] == (256, 2 * 256 // 2) and o_proj["weight_scale"] == (256, 2 * 256 // 16)
    assert up["weight"][1] == 256 // 2 and up["weight_scale"] == (up["weight"][0], 256 // 16)
    # DeepSeek-V4's MXFP4 experts (I8 codes, E8M0 `.scale` per 32) pack the same way
    mtp = _twin_module("dsv4-flash-nvfp4", "mtp.0.ffn.experts.0.w1")
    assert mtp["weight"] == (256, 512 // 2) and mtp["scale"] == (256, 512 // 32)
