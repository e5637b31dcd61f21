"""`mtplint twin` on layouts the project's own generators never wrote (fixtures/external_layouts.py:
transformers' own trunks, other tools' quantized formats, export quirks): the hidden check's
stand-in, measured in full by `scripts/twin_sweep.py --external [--probe]`."""

from __future__ import annotations

import pytest
from mtplint.inventory.checkpoint import load_inventory
from mtplint.inventory.fingerprint import group_modules
from mtplint.twin import build as twin_build
from mtplint.twin import shrink

from fixtures import external_layouts


def _twin_module(src, module: str) -> tuple[dict, dict[str, tuple[int, ...]]]:
    inv = load_inventory(src)
    p = shrink.plan(inv.config)
    p.guess = bool(p.ambiguous)
    leaves = group_modules(inv.tensors.values())[module]
    out = twin_build._module_tensors(module, leaves, p, False, twin_build._num_bits(inv.config), [])
    return p.config.get("text_config", p.config), {n.rsplit(".", 1)[-1]: tuple(t.shape) for n, t in out.items()}


def test_awq_expert_leaves_follow_the_twin_s_logical_shape(tmp_path):
    """AutoAWQ GEMM GLM-5 experts: qweight [in, out/8], qzeros [in/128, out/8], scales [in/128, out].
    Shrunk by value, qzeros kept 48 rows (6144 / 128, no config size) where the twin's hidden 256
    gives 2: vLLM's load raised 'size of tensor a (2) must match ... (48)' (the probe on the twin)."""
    src = external_layouts.write(external_layouts.CASES["glm5-lean-mtp-awq"], tmp_path / "src")
    t, up = _twin_module(src, "model.layers.3.mlp.experts.0.up_proj")
    h, moe = t["hidden_size"], t["moe_intermediate_size"]
    assert up == {"qweight": (h, moe // 8), "qzeros": (h // 128, moe // 8), "scales": (h // 128, moe)}
    _, o = _twin_module(src, "model.layers.3.self_attn.o_proj")
    assert o["qzeros"][0] == o["scales"][0] == o["qweight"][0] // 128 and o["scales"][1] == h


def test_gptq_leaves_with_act_order_follow_the_twin_s_logical_shape(tmp_path):
    """AutoRound (auto_gptq packing) Qwen3-Next experts: qweight [in/8, out], g_idx [in]. By value
    qweight kept 256 rows (2048 / 8, equal to the twin's hidden size) for an in of 256 (32 rows)."""
    src = external_layouts.write(external_layouts.CASES["qwen3-next-autoround-bf16-mtp"], tmp_path / "src")
    t, up = _twin_module(src, "model.layers.0.mlp.experts.0.up_proj")
    h, moe = t["hidden_size"], t["moe_intermediate_size"]
    assert up["qweight"] == (h // 8, moe) and up["g_idx"] == (h,)
    assert up["qzeros"] == (h // 128, moe // 8) and up["scales"] == (h // 128, moe)
    _, down = _twin_module(src, "model.layers.0.mlp.experts.0.down_proj")
    assert (
        down["qweight"] == (moe // 8, h)
        and down["scales"] == (moe // 128, h)
        and down["qzeros"] == (moe // 128, h // 8)
    )


@pytest.mark.parametrize(
    "name",
    ["mimo-7b-gptq-bf16-mtp-g-idx", "dsv3-small-hidden-256-heads-3", "ernie45-21b-bf16-rotary", "qwen3-8b-target-gptq"],
)
def test_a_sample_of_the_external_layouts_gets_a_twin(tmp_path, name):
    case = external_layouts.CASES[name]
    src = external_layouts.write(case, tmp_path / "src")
    t = twin_build.build(src, tmp_path / "twin")
    assert not t.as_is and t.plan is not None and t.plan.hidden[1] <= 256
    twin = load_inventory(tmp_path / "twin")
    n = external_layouts._text(load_inventory(src).config)["num_hidden_layers"]
    n2 = external_layouts._text(twin.config)["num_hidden_layers"]
    # the MTP block (where the layout has one) is in the twin, renumbered after the kept layers
    has_mtp = any(external_layouts._is_mtp(x, n) for x in load_inventory(src).tensors)
    assert has_mtp == any(external_layouts._is_mtp(x, n2) for x in twin.tensors)
