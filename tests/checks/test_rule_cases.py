"""Every rule case in tests/cases/*.toml, linted through the real vLLM probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT, TESTS
from recorded_cases import PINNED_VLLM, assert_case, case_args, load_cases, vllm_python_args

from fixtures.build import cached_build

CASES = load_cases()
pytestmark = pytest.mark.probe


@pytest.fixture(scope="session")
def probe_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("probe-cache")


def lint(path: Path, args: list[str], cache: Path) -> tuple[int, dict]:
    env = dict(os.environ, MTPLINT_CACHE_DIR=str(cache))
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", str(path), "--format", "json", "-q", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_rule_case(case, probe_cache):
    version = case.get("vllm", PINNED_VLLM)
    args = case_args(case) + vllm_python_args(version)
    rc, report = lint(cached_build(case["recipe"]), args, probe_cache)
    assert_case(case, rc, report)


# Cases whose recorded reports are re-probed on every full run: the official layout, a broken
# one with cause chains, a patched re-probe, and an older release.
DRIFT_SAMPLE = (
    "dsv4-official-h100-n1",
    "dsv4-w4a16-bf16-mtp",
    "glm45-air-ct-nvfp4-bf16mtp",
    "dsv4-w4a16-bf16mtp-fixed-vllm029",
)


@pytest.mark.parametrize("case_id", DRIFT_SAMPLE)
def test_recorded_report_matches_the_probe(case_id):
    """The fast tier checks recorded reports; they must still be what the probe writes."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "record_reports.py"), "--check", case_id],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def test_reports_from_a_real_lint_parse_and_validate(probe_cache, tmp_path):
    """`mtplint FIXTURE --format json --format junit --format sarif` on a real probe run."""
    import xml.etree.ElementTree as ET

    jsonschema = pytest.importorskip("jsonschema")
    path = cached_build("dsv4-flash-w4a16-bf16mtp")
    outs = {fmt: tmp_path / f"report.{fmt}" for fmt in ("json", "junit", "sarif")}
    env = dict(os.environ, MTPLINT_CACHE_DIR=str(probe_cache))
    args = [sys.executable, "-m", "mtplint", str(path), "-q"]
    for fmt, out in outs.items():
        args += ["--format", fmt, "--output", str(out)]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 1, proc.stderr[-2000:]

    report = json.loads(outs["json"].read_text())
    from mtplint.reporters.json_report import load_schema

    jsonschema.validate(report, load_schema())
    assert report["summary"]["error"] >= 2

    suite = ET.parse(outs["junit"]).getroot()
    failures = suite.findall(".//failure")
    assert len(failures) >= 2  # MTP001 and MTP002 testcases fail

    schema_path = TESTS / "data" / "sarif-schema-2.1.0.json"
    sarif = json.loads(outs["sarif"].read_text())
    jsonschema.validators.validator_for(json.loads(schema_path.read_text()))(
        json.loads(schema_path.read_text())
    ).validate(sarif)
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} >= {"MTP001", "MTP002"}
