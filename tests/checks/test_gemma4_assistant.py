"""Gemma 4 assistants (issue #24): what the real probe recorded for the assistant cases in
tests/cases/drafters.toml. The assistant is built as vLLM's Gemma4MTP and wired by Gemma4Proposer,
which the model runner picks for `gemma4_mtp` drafts: the assistant's 1024-wide embedding is
replaced by the target's 2816-wide one (vllm #47794: a width guard once cancelled this), and the
assistant keeps its own draft-width head. A regression of the probe's proposer choice (the base
proposer) or of its buffer attribution (`layer_scalar`) shows here."""

from __future__ import annotations

import pytest
from recorded_cases import read_recorded


def _report(case_id: str) -> dict:
    recorded = read_recorded(case_id)
    if recorded is None:
        pytest.fail(f"{case_id}: no recorded report (run scripts/record_reports.py --only {case_id})")
    return recorded["report"]


@pytest.mark.parametrize("case_id", ["gemma4-26b-a4b-assistant", "gemma4-26b-a4b-fp8-bf16-assistant"])
def test_the_assistant_is_wired_by_gemma4_proposer(case_id):
    report = _report(case_id)
    assert report["models"]["draft"]["model_class"].endswith("gemma4_mtp.Gemma4MTP")
    wiring = report["wiring"]
    assert wiring["proposer"] == "vllm.v1.spec_decode.gemma4.Gemma4Proposer"
    assert wiring["errors"] == []
    # Shared with the target's embedding (tied to its lm_head: one parameter, either name).
    assert wiring["shared"].get("model.embed_tokens.weight") in {"model.embed_tokens.weight", "lm_head.weight"}
    assert "lm_head.weight" not in wiring["shared"]  # the draft-width head stays the assistant's


def test_the_assistant_layer_scalars_are_read():
    fed = _report("gemma4-26b-a4b-assistant")["load"]["draft"]["fed"]
    scalars = {t: p for t, p in fed.items() if t.endswith("layer_scalar")}
    assert sorted(scalars) == [f"model.layers.{i}.layer_scalar" for i in range(4)]
    assert all(p == [t] for t, p in scalars.items())


def test_a_bf16_assistant_behind_a_quantized_target_is_built_unquantized():
    decisions = _report("gemma4-26b-a4b-fp8-bf16-assistant")["decisions"]
    target = {d["method"] for d in decisions if d["model"] == "target"}
    assert "CompressedTensorsLinearMethod" in target  # the target is built FP8
    draft = [d for d in decisions if d["model"] == "draft"]
    assert len(draft) == 20, draft  # embedding, pre/post projections, 4 x (q, o, gate_up, down), the head
    assert all(d["method"].startswith("Unquantized") for d in draft), draft
