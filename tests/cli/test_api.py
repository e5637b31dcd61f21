"""The Python API (`mtplint.lint(path, **options) -> Report`), `mtplint rules --format json`,
and the CLI's SARIF for code scanning (issue 15).

Linted with the seed failure's recorded probe report standing in for the vLLM child
(tests/support/recorded_cli.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import mtplint
import pytest
from mtplint.core.errors import EXIT_BAD_INPUT, BadInput
from mtplint.core.findings import RunResult
from mtplint.reporters.json_report import load_schema
from paths import ROOT
from recorded_cli import case_checkpoint, stand_in
from recorded_cli import mtplint as mtplint_cli

DEMO = "dsv4-w4a16-bf16-mtp"
REPO = ROOT
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture
def demo(tmp_path, monkeypatch) -> tuple[Path, list]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    path = case_checkpoint(DEMO)
    return path, stand_in(monkeypatch, {path: DEMO}, tmp_path / "cache")


def _validate(schema: dict, doc: dict) -> None:
    jsonschema.validators.validator_for(schema)(schema).validate(doc)


@pytest.mark.slow
def test_lint_returns_what_the_cli_reports(demo, capsys):
    path, _ = demo
    report = mtplint.lint(path)
    assert isinstance(report, mtplint.Report) and isinstance(report, RunResult)
    assert report.exit_code == 1 and report.fail_on == "error"
    assert len(report.findings) == 11
    assert {f.code for f in report.findings} == {"MTP001", "MTP002", "MTP005"}
    doc = json.loads(report.to_json())
    _validate(load_schema(), doc)
    assert doc == report.to_dict()
    assert mtplint_cli(path, "--format", "json", "--output", "cli.json") == report.exit_code
    cli = json.loads(Path("cli.json").read_text())
    assert [(f["id"], f["severity"]) for f in cli["findings"]] == [(f["id"], f["severity"]) for f in doc["findings"]]
    capsys.readouterr()
    mtplint_cli(path)
    assert capsys.readouterr().out.replace(", cached", "") == report.render("text").replace(", cached", "")


@pytest.mark.slow
def test_options_go_through_the_cli_types(demo):
    path, probed = demo
    report = mtplint.lint(path, select=["MTP001"], fail_on="warning", gpu="h100", num_speculative_tokens=1)
    assert [f.code for f in report.findings] == ["MTP001"]
    assert report.findings[0].severity == "error" and report.exit_code == 1
    assert mtplint.lint(path, ignore="MTP0").findings == []
    assert mtplint.lint(path, ignore="MTP0").exit_code == 0
    assert len(probed) == 1  # the later lints were cache hits


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"num_speculative_tokens": 0}, "num_speculative_tokens must be an integer from 1 to 64, not 0"),
        ({"select": ["MTP999"]}, "unknown rule code 'MTP999'"),
        ({"kv_cache_dtype": "fp9"}, "did you mean fp8"),
        ({"probe_timeout": -5}, "positive number of seconds"),
        ({"fail_on": "fatal"}, 'fail_on must be "error", "warning" or "info", not \'fatal\''),
        ({"reference": "/nonexistent/source"}, "(the --reference checkpoint)"),
    ],
)
def test_bad_options_raise_what_the_cli_exits_2_for(demo, options, says):
    path, probed = demo
    with pytest.raises(BadInput) as err:
        mtplint.lint(path, **options)
    assert says in str(err.value) and err.value.exit_code == EXIT_BAD_INPUT
    assert probed == []


def test_unknown_option_and_bad_checkpoint(tmp_path):
    with pytest.raises(TypeError, match=r"unknown option\(s\) formats"):
        mtplint.lint(tmp_path, formats=["json"])
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(BadInput) as err:
        mtplint.lint(tmp_path)
    assert err.value.exit_code == EXIT_BAD_INPUT


def test_importing_mtplint_stays_cheap():
    # The probe child imports this package inside vLLM's environment, which need not have click.
    code = "import sys, mtplint; assert 'click' not in sys.modules and 'mtplint.api' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_rules_as_json(capsys):
    assert mtplint_cli("rules", "--format", "json") == 0
    rules = json.loads(capsys.readouterr().out)
    shipped = sorted(p.stem for p in (REPO / "rules").glob("MTP*.toml"))
    assert [r["code"] for r in rules] == shipped
    for r in rules:
        assert set(r) == {"code", "name", "severity", "summary", "help_uri", "fixes", "applies_to", "references"}
        assert r["severity"] in ("error", "warning", "info") and r["summary"]
        assert r["help_uri"].endswith(f"/docs/rules/{r['code']}.md")
        assert (REPO / "docs" / "rules" / f"{r['code']}.md").is_file()
    mtp001 = next(r for r in rules if r["code"] == "MTP001")
    assert "rewrite-ignore-to-runtime-names" in mtp001["fixes"]["artifact"]


@pytest.mark.slow
def test_cli_sarif_for_code_scanning(demo):
    path, _ = demo
    rc = mtplint_cli(path, "--format", "sarif", "--output", "r.sarif", "--repo-root", path.parent)
    assert rc == 1
    doc = json.loads(Path("r.sarif").read_text())
    _validate(json.loads(SARIF_SCHEMA.read_text()), doc)
    run = doc["runs"][0]
    assert run["automationDetails"]["id"] == "mtplint/gpu=h100/tp=1/n=1/vllm=0.33.0/"
    dead = next(r for r in run["results"] if r["ruleId"] == "MTP001")
    where = dead["locations"][0]["physicalLocation"]
    assert where["artifactLocation"]["uri"] == f"{path.name}/config.json"
    lines = (path / "config.json").read_text().splitlines()
    assert lines[where["region"]["startLine"] - 1].strip().rstrip(",") == '"re:.*mtp.*"'
