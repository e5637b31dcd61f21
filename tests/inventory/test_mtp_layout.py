"""The one MTP naming module, on every family layout the fixture factory generates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mtplint.core import mtp_layout as L

FAMILY_NAMES = {
    # family: (config, MTP tensor names, trunk tensor names)
    "deepseek_v4": (
        {"num_hidden_layers": 43, "num_nextn_predict_layers": 1},
        ["mtp.0.attn.wq_a.weight", "mtp.0.ffn.experts.0.w1.weight", "mtp.0.enorm.weight"],
        ["layers.42.attn.wq_a.weight", "embed.weight", "head.weight"],
    ),
    "deepseek_v3": (
        {"num_hidden_layers": 61, "num_nextn_predict_layers": 1},
        ["model.layers.61.eh_proj.weight", "model.layers.61.mlp.experts.0.gate_proj.weight"],
        ["model.layers.60.mlp.experts.0.gate_proj.weight", "model.embed_tokens.weight"],
    ),
    "glm45_air": (
        {"num_hidden_layers": 46, "num_nextn_predict_layers": 1},
        ["model.layers.46.eh_proj.weight", "model.layers.46.shared_head.head.weight"],
        ["model.layers.45.self_attn.q_proj.weight", "lm_head.weight"],
    ),
    "qwen3_next": (
        {"num_hidden_layers": 48, "mtp_num_hidden_layers": 1},
        ["mtp.layers.0.self_attn.q_proj.weight", "mtp.fc.weight", "mtp.norm.weight"],
        ["model.layers.47.linear_attn.in_proj_qkvz.weight"],
    ),
    "qwen35_moe": (
        {"text_config": {"num_hidden_layers": 40, "mtp_num_hidden_layers": 1}},
        ["mtp.layers.0.mlp.experts.0.up_proj.weight", "mtp.fc.weight"],
        ["model.language_model.layers.39.mlp.gate.weight", "model.visual.blocks.0.attn.qkv.weight"],
    ),
    "mimo": (
        {"num_hidden_layers": 36, "num_nextn_predict_layers": 1},
        ["model.mtp_layers.0.input_proj.weight", "model.mtp_layers.0.mtp_block.self_attn.q_proj.weight"],
        ["model.layers.35.self_attn.q_proj.weight"],
    ),
    # ERNIE-4.5 MoE: one prefix per MTP part, each indexed (ernie_mtp.py)
    "ernie45_moe": (
        {"num_hidden_layers": 54, "num_nextn_predict_layers": 1},
        ["model.mtp_block.0.self_attn.q_proj.weight", "model.mtp_emb_norm.0.weight", "model.mtp_linear_proj.0.weight"],
        ["model.layers.53.mlp.gate.weight", "model.norm.weight"],
    ),
    # Inkling (native names): the depth in mtp_config, the layers under model.mtp.layers.{i}
    "inkling": (
        {"model_type": "inkling_model", "num_hidden_layers": 66, "mtp_config": {"num_nextn_predict_layers": 1}},
        ["model.mtp.layers.0.input_proj.weight", "model.mtp.layers.0.transformer_block.attn.wq_du.weight"],
        ["model.llm.layers.65.attn.wq_du.weight", "model.llm.norm.weight"],
    ),
    # MiniMax-M3 (VL wrapper): the depth in text_config.num_mtp_modules, the layers under
    # language_model.model.mtp.layers.{i} (minimax_m3/nvidia/mtp.py)
    "minimax_m3": (
        {"model_type": "minimax_m3_vl", "text_config": {"num_hidden_layers": 60, "num_mtp_modules": 1}},
        [
            "language_model.model.mtp.layers.0.eh_proj.weight",
            "language_model.model.mtp.layers.0.transformer_layer.block_sparse_moe.experts.0.w1.weight",
        ],
        [
            "language_model.model.layers.59.block_sparse_moe.gate.weight",
            "vision_tower.vision_model.pre_layrnorm.weight",
        ],
    ),
    # Nemotron-H: one MTP step = len(mtp_hybrid_override_pattern) physical mtp.layers.{j}
    "nemotron_h": (
        {"num_hidden_layers": 88, "num_nextn_predict_layers": 1, "mtp_hybrid_override_pattern": "*E"},
        ["mtp.layers.0.mixer.qkv_proj.weight", "mtp.layers.1.mixer.experts.0.up_proj.weight"],
        ["backbone.layers.87.mixer.in_proj.weight"],
    ),
}


@pytest.mark.parametrize("family", sorted(FAMILY_NAMES))
def test_depth_on_disk_counts_each_family(family):
    config, mtp, trunk = FAMILY_NAMES[family]
    assert L.depth_on_disk(mtp + trunk, config) == 1
    assert L.depth_on_disk(trunk, config) == 0


@pytest.mark.parametrize("family", sorted(FAMILY_NAMES))
def test_mtp_names_are_told_from_trunk_names(family):
    config, mtp, trunk = FAMILY_NAMES[family]
    n = L.num_hidden_layers(config)
    pattern = L.mtp_name_pattern(config)
    assert all(L.is_mtp_name(t, n) for t in mtp)
    assert not any(L.is_mtp_name(t, n) for t in trunk)
    assert all(pattern.match(t) for t in mtp)
    assert not any(pattern.match(t) for t in trunk)


def test_trunk_numbered_layers_count_from_num_hidden_layers():
    """DeepSeek-V3/GLM name MTP layer i `model.layers.{N+i}`: a count of `mtp.` names alone
    would say 0 (the defect this module fixed)."""
    config = {"num_hidden_layers": 61, "num_nextn_predict_layers": 3}
    names = [f"model.layers.{61 + i}.eh_proj.weight" for i in (0, 1, 2)]
    assert L.layers_present(names, 61) == {0, 1, 2}
    assert L.depth_on_disk(names, config) == 3
    # a gap: loaders build 0..depth-1, so layer 2 alone does not make depth 3
    assert L.depth_on_disk(names[:1] + names[2:], config) == 1


def test_depth_field_reads_text_config_and_defaults():
    assert L.depth_field({"num_nextn_predict_layers": 2}) == ("num_nextn_predict_layers", 2)
    assert L.depth_field({"text_config": {"mtp_num_hidden_layers": 1}}) == ("text_config.mtp_num_hidden_layers", 1)
    assert L.depth_field({}) == ("num_nextn_predict_layers", None)
    assert L.declared_depth({"num_nextn_predict_layers": True}) == 0
    assert L.declared_depth({"num_nextn_predict_layers": "2"}) == 0


def test_layer_group():
    assert L.layer_group("model.layers.43.mtp_block.attn") == "model.layers.43."
    assert L.layer_group("mtp.layers.0.mlp") == "mtp.layers.0."
    assert L.layer_group("lm_head") is None


def test_layer_role_drops_the_layer_prefix_of_trunk_and_mtp_names_alike():
    assert L.layer_role("mtp.0.ffn.experts.3.w1") == "ffn.experts.3.w1"  # DeepSeek-V4
    assert L.layer_role("layers.5.ffn.experts.3.w1") == "ffn.experts.3.w1"
    assert L.layer_role("mtp.layers.0.mlp.experts.3.down_proj") == "mlp.experts.3.down_proj"  # Qwen3-Next
    assert L.layer_role("model.layers.46.mlp.experts.3.down_proj") == "mlp.experts.3.down_proj"  # GLM
    assert L.layer_role("model.mtp_layers.0.input_proj") == "input_proj"  # MiMo
    assert L.layer_role("mtp.fc") is None and L.layer_role("lm_head") is None  # not in a layer


def test_vllm_depth_is_the_declared_depth_or_the_loaders_default():
    """Qwen3-Next configs carry no depth key; vLLM 0.33.0's Qwen3NextMTP builds
    getattr(config, "num_nextn_predict_layers", 1) layers and ignores mtp_num_hidden_layers."""
    assert L.vllm_depth({"model_type": "qwen3_next"}) == ("num_nextn_predict_layers", 1)
    assert L.vllm_depth({"model_type": "qwen3_next", "num_nextn_predict_layers": 2}) == ("num_nextn_predict_layers", 2)
    assert L.vllm_depth({"model_type": "qwen3_next", "mtp_num_hidden_layers": 3}) == ("num_nextn_predict_layers", 1)
    assert L.vllm_depth({"model_type": "glm4_moe", "num_nextn_predict_layers": 0}) == ("num_nextn_predict_layers", 0)
    assert L.vllm_depth({"model_type": "glm4_moe"}) == ("num_nextn_predict_layers", 0)
    cfg = {"model_type": "qwen3_5", "text_config": {"num_hidden_layers": 64, "mtp_num_hidden_layers": 2}}
    assert L.vllm_depth(cfg) == ("text_config.mtp_num_hidden_layers", 2)


def test_inkling_depth_is_read_from_mtp_config_only():
    """vLLM 0.33.0 (config/speculative.py:1087) reads Inkling's depth from
    mtp_config.num_nextn_predict_layers and overwrites the draft's top-level key with it."""
    cfg = {"model_type": "inkling_model", "mtp_config": {"num_nextn_predict_layers": 2}}
    assert L.vllm_depth(cfg) == ("mtp_config.num_nextn_predict_layers", 2)
    ignored = {"model_type": "inkling_model", "num_nextn_predict_layers": 3}
    assert L.depth_field(ignored) == ("mtp_config.num_nextn_predict_layers", None)
    assert L.vllm_depth({"model_type": "inkling_mm_model", "mtp_config": {}}) == (
        "mtp_config.num_nextn_predict_layers",
        0,
    )


def test_minimax_m3_depth_is_num_mtp_modules_beside_num_nextn_predict_layers():
    """The published MiniMax-M3 BF16 text_config declares num_mtp_modules 7 and
    num_nextn_predict_layers 1; vLLM 0.33.0 (config/speculative.py:1131) builds num_mtp_modules
    layers, and 1 without the key."""
    both = {"model_type": "minimax_m3_vl", "text_config": {"num_nextn_predict_layers": 1, "num_mtp_modules": 7}}
    assert L.vllm_depth(both) == ("text_config.num_mtp_modules", 7)
    only_nextn = {"model_type": "minimax_m3_vl", "text_config": {"num_nextn_predict_layers": 3}}
    assert L.vllm_depth(only_nextn) == ("num_mtp_modules", 1)
    assert L.vllm_depth({"model_type": "minimax_m3_mtp", "num_mtp_modules": 2}) == ("num_mtp_modules", 2)


def test_nemotron_h_counts_steps_not_physical_layers():
    cfg = {"num_hidden_layers": 88, "num_nextn_predict_layers": 2, "mtp_hybrid_override_pattern": "*E"}
    names = [f"mtp.layers.{j}.norm.weight" for j in range(4)]
    assert L.depth_on_disk(names, cfg) == 2
    assert L.depth_on_disk(names[:3], cfg) == 1  # step 1 half written: only step 0 is whole


_PARTS = ["model", "language_model", "mtp", "layers", "mtp_block", "mtp_emb_norm", "0", "1", "3", "61", "62", "weight"]


@given(
    st.lists(st.lists(st.sampled_from(_PARTS), min_size=1, max_size=9).map(".".join), max_size=20),
    st.sampled_from([None, 0, 2, 61]),
)
def test_layers_present_reads_each_name_head_once_with_the_same_answer(names, n_hidden):
    """layers_present asks once per name head: the answer is the per-name answer."""
    per_name = {i for name in names if (i := L.mtp_layer_index(name, n_hidden)) is not None}
    assert L.layers_present(names, n_hidden) == per_name
