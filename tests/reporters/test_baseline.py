"""Baselines: `--write-baseline FILE` records a run's findings, `--baseline FILE` accepts them
by id and counts only new ones, and entries that no longer occur are reported as fixed
(issue 15). Linted through the real CLI over the seed failure's recorded probe report
(tests/support/recorded_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from mtplint.pipeline.baseline import SCHEMA
from mtplint.reporters.json_report import load_schema
from recorded_cli import case_checkpoint, mtplint, stand_in

CASE = "dsv4-w4a16-bf16-mtp"  # 11 errors: MTP001 -> 5 x MTP002 -> 5 x MTP005
SEED = "MTP001:re:.*mtp.*"


@pytest.fixture
def seed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = case_checkpoint(CASE)
    probed = stand_in(monkeypatch, {path: CASE}, tmp_path / "cache")
    return path, probed


def _lint(path: Path, *extra: str) -> tuple[int, dict]:
    rc = mtplint(path, "--format", "json", "--output", "report.json", *extra)
    return rc, json.loads(Path("report.json").read_text())


@pytest.mark.slow
def test_write_then_lint_against_the_baseline(seed, capsys):
    path, _ = seed
    rc, report = _lint(path, "--write-baseline", "mtplint-baseline.json")
    assert rc == 0  # everything found is now recorded: this run reads as the next one will
    assert "mtplint: wrote baseline mtplint-baseline.json: 11 finding(s) recorded" in capsys.readouterr().err
    doc = json.loads(Path("mtplint-baseline.json").read_text())
    assert doc["schema"] == SCHEMA and doc["vllm"]["version"]
    assert "path" not in doc["inputs"]  # the same baseline serves wherever the checkpoint is checked out
    ids = [e["id"] for e in doc["findings"]]
    assert ids == sorted(ids) and SEED in ids and len(ids) == 11
    assert all(set(e) == {"id", "code", "severity", "message", "hash"} for e in doc["findings"])
    assert report["findings"] == [] and report["baseline"]["matched"] == 11
    assert {s["suppression"]["kind"] for s in report["suppressed"]} == {"baseline"}

    rc, report = _lint(path, "--baseline", "mtplint-baseline.json", "--format", "text", "--output", "report.txt")
    assert rc == 0
    assert report["summary"] == {"error": 0, "warning": 0, "info": 0}
    assert report["baseline"] == {"file": "mtplint-baseline.json", "matched": 11, "changed": 0, "new": 0, "fixed": []}
    assert "mtplint: baseline mtplint-baseline.json: 11 finding(s) baselined, 0 new" in capsys.readouterr().err
    assert "11 baselined" in Path("report.txt").read_text().strip().splitlines()[-1]
    jsonschema.validators.validator_for(load_schema())(load_schema()).validate(report)


@pytest.mark.slow
def test_new_findings_count_and_entries_gone_are_fixed(seed, capsys):
    path, _ = seed
    _lint(path, "--write-baseline", "b.json")
    doc = json.loads(Path("b.json").read_text())
    entries = {e["id"]: e for e in doc["findings"]}
    del entries[SEED]  # not in the baseline: new again
    changed = next(i for i in entries if i.startswith("MTP002:"))
    entries[changed]["hash"] = "0" * 16  # the finding's content changed since: still matched by id
    gone = {"id": "MTP013:mtp.0.removed.weight", "code": "MTP013", "severity": "warning", "message": "m", "hash": "x"}
    entries[gone["id"]] = gone
    Path("b.json").write_text(json.dumps({**doc, "findings": list(entries.values())}))
    capsys.readouterr()

    rc, report = _lint(path, "--baseline", "b.json")
    assert rc == 1
    assert [f["id"] for f in report["findings"]] == [SEED]
    assert report["baseline"] == {
        "file": "b.json",
        "matched": 10,
        "changed": 1,
        "new": 1,
        "fixed": [{"id": gone["id"], "code": "MTP013", "message": "m"}],
    }
    err = capsys.readouterr().err
    assert "baseline b.json: 10 finding(s) baselined (1 changed since it was written), 1 new" in err
    assert f"baseline b.json: 1 entry no longer occurs (fixed): {gone['id']}; --write-baseline b.json drops them" in err

    # An entry of a rule this run does not evaluate is unchecked, not fixed.
    rc, report = _lint(path, "--baseline", "b.json", "--select", "MTP001,MTP002,MTP005")
    assert rc == 1 and report["baseline"]["fixed"] == []
    assert "no longer occur" not in capsys.readouterr().err

    # Rewriting the baseline records the current findings and drops the fixed entry.
    rc, report = _lint(path, "--baseline", "b.json", "--write-baseline", "b.json")
    assert rc == 0
    assert "11 finding(s) recorded, 1 entry of the previous baseline dropped (fixed)" in capsys.readouterr().err
    assert {e["id"] for e in json.loads(Path("b.json").read_text())["findings"]} == set(entries) - {gone["id"]} | {SEED}


@pytest.mark.slow
def test_config_suppressions_stay_out_of_the_baseline(seed):
    path, _ = seed
    Path("mtplint.toml").write_text(f'[[suppress]]\nid = "{SEED}"\nreason = "kept for vLLM 0.34"\n')
    rc, report = _lint(path, "--write-baseline", "b.json")
    assert rc == 0
    assert SEED not in {e["id"] for e in json.loads(Path("b.json").read_text())["findings"]}
    assert {s["id"]: s["suppression"]["kind"] for s in report["suppressed"]}[SEED] == "config"
    Path("mtplint.toml").unlink()  # the reason is withdrawn: the finding counts again
    rc, report = _lint(path, "--baseline", "b.json")
    assert rc == 1 and [f["id"] for f in report["findings"]] == [SEED]


BAD_BASELINES = {
    "missing": (None, "cannot read baseline"),
    "not json": ("{", "not valid JSON"),
    "another file": ('{"schema": "mtplint/report/v1", "findings": []}', "not an mtplint baseline"),
    "bad entries": (json.dumps({"schema": SCHEMA, "findings": [{"code": "MTP001"}]}), "list of objects with an id"),
}


@pytest.mark.parametrize("name", sorted(BAD_BASELINES))
def test_unusable_baseline_is_exit_2_before_the_probe(seed, capsys, name):
    path, probed = seed
    body, why = BAD_BASELINES[name]
    if body is not None:
        Path("b.json").write_text(body)
    rc = mtplint(path, "--baseline", "b.json")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].startswith("mtplint: error: b.json: ") and why in err[-1], err
    assert probed == []


def test_unwritable_baseline_target_is_exit_2_before_the_probe(seed, capsys):
    path, probed = seed
    rc = mtplint(path, "--write-baseline", "no-such-dir/b.json")
    assert rc == 2
    assert "no-such-dir/b.json: cannot write the baseline there" in capsys.readouterr().err
    assert probed == []
