"""A known silent defect (MTP030) that the deployment already works around is not reported:
the probe records the switches vLLM read off the serve command (`served_with`:
lint/probe/child/switches.py), and a row's `avoided_by` names the workarounds that spare it."""

from __future__ import annotations

import copy

import pytest
import test_rule_cases_fast
from recorded_cases import load_cases

FIRING = "dflash-llama31-8b-b200-vllm0251"  # vllm #48167 on B200 with 0.25.1


def _codes_with(monkeypatch, served_with: dict[str, str]) -> list[str]:
    case = next(c for c in load_cases() if c["id"] == FIRING)
    recorded = test_rule_cases_fast.recorded_report(FIRING)
    inputs, report = recorded
    report = copy.deepcopy(report)
    report.served_with = served_with  # as the child writes it for a command with these switches
    monkeypatch.setattr(test_rule_cases_fast, "recorded_report", lambda _id: (inputs, report))
    _, out = test_rule_cases_fast._lint_paused(case)
    return [f["code"] for f in out["findings"]]


@pytest.mark.parametrize(
    ("served_with", "reported"),
    [
        ({}, True),  # not read (a report from before served_with): as before
        ({"enforce_eager": "false"}, True),
        ({"enforce_eager": "false", "attention_backend": "FLASHINFER"}, True),
        ({"enforce_eager": "true"}, False),
        ({"enforce_eager": "false", "attention_backend": "FLASH_ATTN"}, False),
    ],
)
def test_a_deployment_with_the_workaround_is_spared(monkeypatch, served_with, reported):
    assert ("MTP030" in _codes_with(monkeypatch, served_with)) is reported


@pytest.mark.probe
def test_the_probe_reads_the_switches_off_the_command(tmp_path, monkeypatch):
    from mtplint.inventory.checkpoint import load_inventory
    from mtplint.probe.runner import ProbeRequest, run_probe

    from fixtures.build import cached_build

    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / "cache"))
    path = str(cached_build("mimo-bf16"))
    inventory = load_inventory(path)
    spec = ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}']

    def served_with(*flags: str) -> dict[str, str]:
        request = ProbeRequest(
            sm=[10, 0],
            gpu_name="NVIDIA B200",
            gpu_memory=180 << 30,
            trust_remote_code=True,
            serve_argv=[path, "--trust-remote-code", *spec, *flags],
            serve_model=path,
        )
        return run_probe(inventory, request, use_cache=False).served_with

    assert served_with() == {}  # vLLM's defaults: nothing recorded (reports of default deployments unchanged)
    assert served_with("--enforce-eager", "--attention-backend", "FLASH_ATTN") == {
        "enforce_eager": "true",
        "attention_backend": "FLASH_ATTN",
    }
