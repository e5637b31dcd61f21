"""Every rule case in tests/cases/*.toml, linted through the real vLLM probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fixtures.build import cached_build

CASES_DIR = Path(__file__).parent / "cases"
ROOT = Path(__file__).parent.parent
RULES_DIR = ROOT / "rules"
PINNED_VLLM = "0.33.0"


def load_cases() -> list[dict]:
    cases = []
    for f in sorted(CASES_DIR.glob("*.toml")):
        cases += tomllib.loads(f.read_text())["case"]
    return cases


CASES = load_cases()


@pytest.fixture(scope="session")
def probe_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("probe-cache")


def lint(path: Path, args: list[str], cache: Path) -> tuple[int, dict]:
    env = dict(os.environ, MTPLINT_CACHE_DIR=str(cache))
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint.cli_main", str(path), "--format", "json", "-q", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def vllm_python(version: str) -> list[str]:
    """--vllm-python for a case that probes another vLLM release (scripts/setup.sh installs
    those of requirements/vllm-alt.txt)."""
    if version == PINNED_VLLM:
        return []
    python = ROOT / ".vllm-alt" / version / "python"
    assert python.exists(), f"vLLM {version} is not installed beside the pin: run scripts/alt_vllm.sh {version}"
    return ["--vllm-python", str(python)]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_rule_case(case, probe_cache):
    version = case.get("vllm", PINNED_VLLM)
    rc, report = lint(cached_build(case["recipe"]), case["args"] + vllm_python(version), probe_cache)
    codes = {f["code"] for f in report["findings"]}
    for code in case["fires"]:
        assert code in codes, f"{code} did not fire; findings: {sorted(codes)}"
    for code in case["silent"]:
        assert code not in codes, f"{code} fired: {[f['message'] for f in report['findings'] if f['code'] == code]}"
    if "max_errors" in case:
        errors = [f for f in report["findings"] if f["severity"] == "error"]
        assert len(errors) <= case["max_errors"], [f["message"] for f in errors]
        assert rc == 0
    for code, needle in case.get("message_contains", {}).items():
        assert any(needle in f["message"] for f in report["findings"] if f["code"] == code)
    for code, needle in case.get("message_absent", {}).items():
        assert not any(needle in f["message"] for f in report["findings"] if f["code"] == code), needle
    for code, needle in case.get("evidence_contains", {}).items():
        assert any(
            needle in json.dumps(f["evidence"]) or needle in f["message"]
            for f in report["findings"]
            if f["code"] == code
        ), needle
    ids = {f["id"]: f for f in report["findings"]}
    for code, cause_code in case.get("caused_by", {}).items():
        assert any(
            f["caused_by"] and ids[f["caused_by"]]["code"] == cause_code
            for f in report["findings"]
            if f["code"] == code
        ), f"{code} not linked to {cause_code}"
    for code, patches in case.get("patches_recommended", {}).items():
        assert any(f["fixes"]["patches"] == patches for f in report["findings"] if f["code"] == code), [
            f["fixes"] for f in report["findings"] if f["code"] == code
        ]
    assert report["vllm"]["version"] == version


def test_every_rule_fires_and_stays_silent_somewhere():
    shipped = {p.stem for p in RULES_DIR.glob("MTP*.toml")}
    fires = {c for case in CASES for c in case["fires"]}
    silent = {c for case in CASES for c in case["silent"]}
    assert shipped, "no rules shipped"
    assert not shipped - fires, f"rules with no firing case: {sorted(shipped - fires)}"
    assert not shipped - silent, f"rules with no silent case: {sorted(shipped - silent)}"


def test_reports_from_a_real_lint_parse_and_validate(probe_cache, tmp_path):
    """`mtplint FIXTURE --format json --format junit --format sarif` on a real probe run."""
    import xml.etree.ElementTree as ET

    jsonschema = pytest.importorskip("jsonschema")
    path = cached_build("dsv4-flash-w4a16-bf16mtp")
    outs = {fmt: tmp_path / f"report.{fmt}" for fmt in ("json", "junit", "sarif")}
    env = dict(os.environ, MTPLINT_CACHE_DIR=str(probe_cache))
    args = [sys.executable, "-m", "mtplint.cli_main", str(path), "-q"]
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

    schema_path = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
    sarif = json.loads(outs["sarif"].read_text())
    jsonschema.validators.validator_for(json.loads(schema_path.read_text()))(
        json.loads(schema_path.read_text())
    ).validate(sarif)
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} >= {"MTP001", "MTP002"}
