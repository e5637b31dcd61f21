"""The dry run's attribution of checkpoint tensors: tensors a loader holds back until a
partner arrives, and names a vLLM WeightsMapper drops (no vLLM import: the attribution
logic alone, on real torch meta tensors)."""

from __future__ import annotations

import gc

import pytest
import torch
from mtplint.probe.child.dryrun import _Attribution, _same_tensor


def _attribution() -> _Attribution:
    # Without __init__: that wraps a model's parameters, which needs vLLM.
    a = _Attribution.__new__(_Attribution)
    a._current, a.current_fed, a.failed_param = None, False, None
    a.fed, a.held_back, a.params_loaded_by_loader, a._restore, a._held = {}, {}, set(), [], {}
    a._names, a.failed_tensor, a._in_loader, a._alive, a._held_for = {}, None, 0, {}, {}
    return a


def _meta() -> torch.Tensor:
    return torch.empty((4, 4), device="meta")


@pytest.mark.slow
def test_a_tensor_held_back_until_its_partner_loads_is_read_with_it():
    a = _attribution()
    buffer = {}
    a.current = "l.0.indexer.wk.weight"
    buffer["weight"] = a.hand_out("l.0.indexer.wk.weight", _meta())  # held, nothing loaded yet
    a.current = "l.0.indexer.wk.weight_scale_inv"
    scale = a.hand_out("l.0.indexer.wk.weight_scale_inv", _meta())
    a.fed.setdefault(a.current, []).append("l.0.indexer.wk_weights_proj.weight")  # what a loader call records
    a.current_fed = True
    del buffer["weight"], scale  # released after the pair was loaded
    gc.collect()
    assert a.held_back == {"l.0.indexer.wk.weight": "l.0.indexer.wk.weight_scale_inv"}
    assert "l.0.indexer.wk.weight" not in a.fed  # fed nothing as it is (dequantized first)


def test_a_tensor_still_held_when_its_partner_feeds_their_module_is_read_with_it():
    """vLLM 0.33.0 MiMoV2MTP.load_weights keeps the FP8 fused qkv weight in a local until it
    returns: it is freed after the feed ended, but was alive when its scale's loading fed the
    module's parameters."""
    a = _attribution()
    prefix = "model.mtp.layers.0.self_attn.qkv_proj"
    a.current = f"{prefix}.weight"
    entry = {"weight": a.hand_out(f"{prefix}.weight", _meta())}
    a.current = f"{prefix}.weight_scale_inv"
    entry["weight_scale_inv"] = a.hand_out(f"{prefix}.weight_scale_inv", _meta())
    a._fed(f"{prefix}.weight")
    a._fed(f"{prefix}.weight_scale_inv")
    a.current = None  # the feed ended; the loader still holds both
    del entry
    gc.collect()
    assert a.held_back == {f"{prefix}.weight": f"{prefix}.weight_scale_inv"}


def test_a_tensor_kept_waiting_for_a_partner_that_never_comes_is_not_credited():
    """vLLM 0.33.0 MiMoV2Model keeps an FP8 fused qkv weight on the module until its
    weight_scale_inv arrives; a compressed-tensors export has a weight_scale instead, which
    loads, and the weight is never read."""
    a = _attribution()
    pending = {}
    a.current = "l.1.qkv_proj.weight"
    pending["weight"] = a.hand_out("l.1.qkv_proj.weight", _meta())
    a.current = "l.1.qkv_proj.weight_scale"
    a.hand_out("l.1.qkv_proj.weight_scale", _meta())
    a._fed("l.1.qkv_proj.weight_scale")
    a.current = None
    assert not a.held_back
    del pending


def test_a_held_tensor_of_another_module_is_not_credited():
    a = _attribution()
    a.current = "l.0.k_proj.weight"
    held = a.hand_out("l.0.k_proj.weight", _meta())
    a.current = "l.0.q_proj.weight"
    a.hand_out("l.0.q_proj.weight", _meta())
    a._fed("l.0.q_proj.weight")
    assert not a.held_back
    del held


def test_a_tensor_skipped_when_the_loop_moves_on_is_credited_with_nothing():
    a = _attribution()
    a.current = "l.0.rotary_emb.inv_freq"
    held = a.hand_out("l.0.rotary_emb.inv_freq", _meta())
    a.current = "l.0.q_proj.weight"  # the generator hands out the next one before the loop rebinds
    del held
    gc.collect()
    assert not a.held_back and not a.fed


def test_a_mapper_drop_belongs_to_the_tensor_fed_only_when_it_names_the_same_tensor():
    tensor = "model.language_model.layers.3.mlp.experts.7.down_proj.g_idx"
    assert _same_tensor("language_model.model.layers.3.mlp.experts.7.down_proj.g_idx", tensor)
    assert not _same_tensor("language_model.model.layers.3.mlp.experts.8.down_proj.g_idx", tensor)
    assert not _same_tensor("language_model.model.layers.3.mlp.experts.7.down_proj.qweight", tensor)


def test_a_tensor_loaded_after_the_feed_ended_is_credited_by_identity():
    """EAGLE3's load_weights takes every tensor into a dict before loading any: its loaders run
    with no current tensor, and the tensor a loader is given (or a view of it) says which it is."""
    a = _attribution()
    fc, norm = a.hand_out("fc.weight", _meta()), a.hand_out("norm.weight", _meta())
    params = {n: torch.nn.Parameter(torch.empty((4, 4), device="meta"), requires_grad=False) for n in ("fc", "norm")}
    for name, p in params.items():
        a._wrap(p, f"model.{name}.weight", lambda param, weight: None, had_own=True)
    a.current = None
    params["norm"].weight_loader(params["norm"], norm)
    params["fc"].weight_loader(params["fc"], fc.view(16))
    assert a.fed == {"norm.weight": ["model.norm.weight"], "fc.weight": ["model.fc.weight"]}
