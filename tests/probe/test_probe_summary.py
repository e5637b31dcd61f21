"""The run's vLLM identity and probe summary, typed (issue 34): RunResult.vllm is a ProbedVllm and
RunResult.probe a ProbeSummary, written as the report's JSON `vllm` and `probe` members were
and read back from what a remembered verdict stored before they were typed."""

from __future__ import annotations

import dataclasses

import pytest
from mtplint.core.findings import RunResult
from mtplint.core.probe_summary import ProbedVllm, ProbeSummary
from mtplint.core.run_inputs import RunInputs
from mtplint.pipeline import verdict_cache
from mtplint.reporters.json_report import build_report

LIBRARIES = {"transformers": "4.57.1", "compressed-tensors": "0.12.2", "torch": "2.9.0+cpu"}


@pytest.mark.parametrize(
    "doc",
    [
        {"version": "0.33.0", "commit": "4ba787ec9d"},
        {"version": "0.19.0", "commit": None, "libraries": LIBRARIES},
        {"version": None, "commit": None},
    ],
)
def test_the_vllm_identity_writes_the_json_it_reads(doc):
    vllm = ProbedVllm.from_json(doc)
    assert vllm.to_json() == doc
    assert (vllm.version, vllm.commit) == (doc["version"], doc["commit"])


@pytest.mark.parametrize("doc", [{"cached": True, "seconds": 0.41}, {"cached": False, "seconds": 41.5}])
def test_the_probe_summary_writes_the_json_it_reads(doc):
    assert ProbeSummary.from_json(doc).to_json() == doc


def test_a_verdict_remembered_with_dicts_is_recalled_typed():
    """The payload as `store` wrote it before the types (same verdict format): it decodes."""
    payload = {
        "findings": [],
        "evaluated": [],
        "inputs": RunInputs(path="ckpt").to_json(),
        "vllm": {"version": "0.33.0", "commit": "4ba787ec9d", "libraries": LIBRARIES},
        "probe": {"cached": False, "seconds": 12.3},
        "origin": None,
        "counts": [10, 1],
        "modules": [],
    }
    hit = verdict_cache._decode(payload)
    assert hit.vllm == ProbedVllm("0.33.0", "4ba787ec9d", LIBRARIES)
    assert hit.probe == ProbeSummary(cached=False, seconds=12.3)


def test_the_json_report_holds_what_the_dicts_held():
    result = RunResult(
        findings=[],
        rules_evaluated=[],
        vllm=ProbedVllm("0.19.0", "g2a69949bd", LIBRARIES),
        inputs=RunInputs(path="ckpt"),
        probe=ProbeSummary(cached=True, seconds=0.5),
    )
    doc = build_report(result)
    assert doc["vllm"] == {"version": "0.19.0", "commit": "g2a69949bd", "libraries": LIBRARIES, "shared": ["torch"]}
    assert doc["probe"] == {"cached": True, "seconds": 0.5}
    assert "probe" not in build_report(dataclasses.replace(result, probe=None))  # no probe said how it ran
