"""MTP028 (draft-max-positions-below-deployment) over the recorded probe reports of a DFlash draft
published at 8192 positions behind a 131072-position target: the length served (--max-model-len of
the serve command, else the target's), the RoPE types judged, and the method."""

from __future__ import annotations

import dataclasses
import json

import pytest
from mtplint.core.run_inputs import RunInputs
from mtplint.engine.evaluate import evaluate
from mtplint.inventory.checkpoint import load_inventory
from recorded_cases import recorded_report

from fixtures.build import cached_build

TARGET = "llama31-8b-instruct-fp8-dynamic"
DRAFT = "dflash-llama31-8b-short-positions"


def _lint(*, serve_argv=(), draft_config=None, method="dflash", case="dflash-llama31-8b-short-positions-vllm029"):
    draft = load_inventory(cached_build(DRAFT))
    if draft_config is not None:
        draft = dataclasses.replace(draft, config=draft_config)
    recorded = recorded_report(case)
    assert recorded is not None
    report = recorded[1]
    request = dataclasses.replace(report.request, serve_argv=list(serve_argv), speculative={"method": method})
    report = dataclasses.replace(report, request=request)
    inputs = RunInputs(path="draft", target="target", method=method)
    findings, _ = evaluate(draft, report, inputs, select=["MTP028"], target=load_inventory(cached_build(TARGET)))
    return findings


def test_short_draft_on_a_release_without_the_fix():
    (f,) = _lint()
    assert (f.severity, f.basis, f.location.config_key) == ("error", "probe", "max_position_embeddings")
    assert "below the 131072 positions the deployment serves (the target's max_position_embeddings" in f.message


@pytest.mark.parametrize(
    ("argv", "fires"),
    [
        (["--max-model-len", "8192"], False),
        (["--max-model-len=8k"], False),  # 8000: vLLM's lower-case k is decimal
        (["--max-model-len", "32K"], True),  # 32768
        (["--max_model_len", "auto"], True),  # not a number: the target's length stands
    ],
)
def test_the_length_served(argv, fires):
    found = _lint(serve_argv=["m", *argv])
    assert bool(found) is fires
    if fires and "32K" in argv:
        assert "below the 32768 positions the deployment serves (--max-model-len 32K)" in found[0].message


def test_rope_types_not_judged_and_independent_drafts_are_silent():
    config = json.loads(cached_build(DRAFT).joinpath("config.json").read_text())
    yarn = {**config, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}}
    assert _lint(draft_config=yarn) == []
    assert _lint(method="draft_model") == []


def test_the_pinned_release_raises_the_draft_itself():
    assert _lint(case="dflash-llama31-8b-short-positions") == []
