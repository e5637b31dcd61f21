"""Per-finding suppressions: `[[suppress]]` in the project's settings file (issue 15).

Parsing and matching run on their own; the command-line tests lint the seed failure (MTP001 ->
5 x MTP002 -> 5 x MTP005) through the real CLI with its recorded probe report standing in for
the vLLM child (tests/support/recorded_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from mtplint.config.settings import load_settings
from mtplint.config.suppressions import Suppression
from mtplint.core.errors import BadInput
from mtplint.core.findings import Finding, Location
from mtplint.reporters.json_report import load_schema
from paths import TESTS
from recorded_cli import case_checkpoint, mtplint, stand_in

CASE = "dsv4-w4a16-bf16-mtp"
SARIF_SCHEMA = TESTS / "data" / "sarif-schema-2.1.0.json"
SEED_ENTRY = "re:.*mtp.*"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt").mkdir()
    return tmp_path


def _suppress(project: Path, text: str) -> tuple:
    (project / "mtplint.toml").write_text(text)
    return load_settings(Path("ckpt"), {}).lint.suppress


# -- parsing ---------------------------------------------------------------------------------


def test_both_forms_parse_with_their_lines(project):
    got = _suppress(
        project,
        'fail-on = "error"\n\n[[suppress]]\nid = "MTP001:re:.*mtp.*"\nreason = "matched by vLLM 0.34"\n\n'
        '[[suppress]]\ncode = "mtp005"\nlocation = "model.layers.43.*"\npath = "ckpt"\nreason = " shared "\n',
    )
    assert got == (
        Suppression(reason="matched by vLLM 0.34", source="./mtplint.toml", entry=1, line=3, id="MTP001:re:.*mtp.*"),
        Suppression(
            reason="shared",
            source="./mtplint.toml",
            entry=2,
            line=7,
            code="MTP005",
            location="model.layers.43.*",
            path="ckpt",
        ),
    )


def test_pyproject_tables_parse(project):
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.mtplint]\nselect = "MTP"\n\n'
        '[[tool.mtplint.suppress]]\nid = "MTP013:mtp.0.x"\nreason = "kept for the next release"\n'
    )
    (got,) = load_settings(Path("ckpt"), {}).lint.suppress
    assert (got.id, got.source, got.line) == ("MTP013:mtp.0.x", "./pyproject.toml [tool.mtplint]", 7)
    assert got.where() == "./pyproject.toml:7"


BAD = {
    "no reason": ('id = "MTP001:x"', "reason is required"),
    "empty reason": ('id = "MTP001:x"\nreason = "  "', "reason is required"),
    "id and code": ('id = "MTP001:x"\ncode = "MTP001"\nlocation = "*"\nreason = "r"', "either id"),
    "neither": ('location = "*"\nreason = "r"', "either id"),
    "unknown key": ('id = "MTP001:x"\nreason = "r"\nexpires = "2027"', "unknown key(s) 'expires'"),
    "unknown rule": ('id = "MTP999:x"\nreason = "r"', "unknown rule code MTP999"),
    "code alone": ('code = "MTP005"\nreason = "r"', "code needs a location"),
    "id without key": ('id = "MTP001"\nreason = "r"', 'finding id "CODE:KEY"'),
    "id with location": ('id = "MTP001:x"\nlocation = "*"\nreason = "r"', "location goes with code"),
    "not a string": ('id = "MTP001:x"\nreason = 3', "reason must be a string"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_entry_is_exit_2_naming_file_line_and_entry(project, name):
    body, why = BAD[name]
    (project / "mtplint.toml").write_text(f'[[suppress]]\nid = "MTP001:ok"\nreason = "fine"\n\n[[suppress]]\n{body}\n')
    with pytest.raises(BadInput) as exc:
        load_settings(Path("ckpt"), {})
    line = exc.value.one_line()
    assert exc.value.exit_code == 2
    assert line.startswith("./mtplint.toml:5: [[suppress]] entry 2: "), line
    assert why in line, line


def test_inline_array_entries_are_named_without_a_line(project):
    (project / "mtplint.toml").write_text('suppress = [{id = "MTP001:x"}]\n')
    with pytest.raises(BadInput) as exc:
        load_settings(Path("ckpt"), {})
    assert exc.value.one_line().startswith("./mtplint.toml: [[suppress]] entry 1: reason is required")


def test_suppress_must_be_tables(project):
    (project / "mtplint.toml").write_text('suppress = "MTP001"\n')
    with pytest.raises(BadInput, match="array of tables"):
        load_settings(Path("ckpt"), {})


def test_a_checkpoint_cannot_suppress_its_own_findings(project):
    (project / "ckpt" / "mtplint.toml").write_text(
        '[[suppress]]\ncode = "MTP001"\nlocation = "*"\nreason = "trust me"\n'
    )
    with pytest.raises(BadInput) as exc:
        load_settings(Path("ckpt"), {})
    line = exc.value.one_line()
    assert line.startswith(str(Path("ckpt") / "mtplint.toml") + ": suppress cannot be set by the checkpoint"), line


# -- matching --------------------------------------------------------------------------------


def _finding(code="MTP005", key="model.layers.43.mtp_block.attn.wq_b", **loc) -> Finding:
    return Finding(code, "n", "error", "m", Location(**{"file": "config.json", **loc}), key=key)


@pytest.mark.parametrize(
    ("location", "finding", "hit"),
    [
        ("model.layers.43.mtp_block.*", _finding(), True),  # the key
        ("config.json", _finding(), True),  # the file
        ("mtp.0.attn.*", _finding("MTP002", tensor="mtp.0.attn.wkv.weight", file="model-1.safetensors"), True),
        ("quantization_config.ignore", _finding("MTP001", key="re:x", config_key="quantization_config.ignore"), True),
        ("model-1.safetensors:mtp.0.*", _finding("MTP002", tensor="mtp.0.x", file="model-1.safetensors"), True),
        ("model.layers.44.*", _finding(), False),
        ("MODEL.layers.43.*", _finding(), False),  # names are case-sensitive
    ],
)
def test_location_is_a_glob_over_file_tensor_config_key_or_key(location, finding, hit):
    s = Suppression(reason="r", source="./mtplint.toml", entry=1, code=finding.code, location=location)
    assert s.matches(finding) is hit
    other_rule = Suppression(reason="r", source="./mtplint.toml", entry=1, code="MTP013", location="*")
    assert not other_rule.matches(finding)


def test_id_matches_exactly_one_finding():
    s = Suppression(reason="r", source="s", entry=1, id="MTP005:model.layers.43.mtp_block.attn.wq_b")
    assert s.matches(_finding())
    assert not s.matches(_finding(key="model.layers.43.mtp_block.attn.wq_b.extra"))


def test_path_scopes_a_suppression_to_checkpoint_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = Suppression(reason="r", source="s", entry=1, id="MTP001:x", path="models/dsv4-*")
    assert s.applies_to("models/dsv4-w4a16") and s.applies_to("./models/dsv4-w4a16/")
    assert s.applies_to(str(tmp_path / "models" / "dsv4-w4a16"))  # an absolute path under the project
    assert not s.applies_to("models/glm45")
    assert Suppression(reason="r", source="s", entry=1, id="MTP001:x").applies_to("anything")


# -- the command line over the seed failure --------------------------------------------------


@pytest.fixture
def seed(project, monkeypatch) -> Path:
    """The seed failure's checkpoint, linted from a project directory with its recorded probe."""
    path = case_checkpoint(CASE)
    stand_in(monkeypatch, {path: CASE}, project / "cache")
    return path


def _lint(path: Path, project: Path, *extra: str) -> tuple[int, dict]:
    out = project / "report.json"
    rc = mtplint(path, "-q", "--format", "json", "--output", out, *extra)
    return rc, json.loads(out.read_text())


@pytest.mark.slow
def test_suppressed_findings_do_not_count_and_are_reported_with_their_reason(seed, project, capsys):
    rc, before = _lint(seed, project)
    assert rc == 1 and before["summary"]["error"] == 11, before["summary"]
    assert f"MTP001:{SEED_ENTRY}" in {f["id"] for f in before["findings"]}
    (project / "mtplint.toml").write_text(
        f'[[suppress]]\nid = "MTP001:{SEED_ENTRY}"\nreason = "kept for vLLM 0.34, which matches it"\n\n'
        '[[suppress]]\ncode = "MTP005"\nlocation = "model.layers.43.mtp_block.*"\nreason = "follows from MTP002"\n'
    )
    capsys.readouterr()
    sarif_out, text_out = project / "r.sarif", project / "r.txt"
    rc, report = _lint(
        seed, project, "--format", "sarif", "--output", sarif_out, "--format", "text", "--output", text_out
    )
    assert rc == 1  # the five MTP002 errors still count
    assert {f["code"] for f in report["findings"]} == {"MTP002"}
    assert report["summary"]["error"] == 5
    suppressed = {s["id"]: s["suppression"] for s in report["suppressed"]}
    assert len(suppressed) == 6
    assert suppressed[f"MTP001:{SEED_ENTRY}"] == {
        "kind": "config",
        "reason": "kept for vLLM 0.34, which matches it",
        "source": "./mtplint.toml:1 [[suppress]] entry 1",
    }
    assert {s["reason"] for i, s in suppressed.items() if i.startswith("MTP005:")} == {"follows from MTP002"}
    assert "unused_suppressions" not in report
    jsonschema.validators.validator_for(load_schema())(load_schema()).validate(report)

    sarif = json.loads(sarif_out.read_text())
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(sarif)
    results = sarif["runs"][0]["results"]
    marked = [r for r in results if r.get("suppressions")]
    assert len(results) == 11 and len(marked) == 6
    assert {r["ruleId"] for r in marked} == {"MTP001", "MTP005"}
    assert all(
        r["suppressions"][0]["kind"] == "external" and r["suppressions"][0]["status"] == "accepted" for r in marked
    )
    assert "kept for vLLM 0.34, which matches it" in {r["suppressions"][0]["justification"] for r in marked}

    assert "6 suppressed" in text_out.read_text().strip().splitlines()[-1]
    assert "unused suppression" not in capsys.readouterr().err


@pytest.mark.slow
def test_suppressing_every_error_passes(seed, project):
    (project / "mtplint.toml").write_text(
        '[[suppress]]\ncode = "MTP002"\nlocation = "mtp.0.*"\nreason = "the draft runs unquantized with a patch"\n'
        '[[suppress]]\ncode = "MTP005"\nlocation = "*"\nreason = "follows from MTP002"\n'
        f'[[suppress]]\nid = "MTP001:{SEED_ENTRY}"\nreason = "kept on purpose"\n'
    )
    rc, report = _lint(seed, project)
    assert rc == 0, report["findings"]
    assert report["findings"] == [] and len(report["suppressed"]) == 11


@pytest.mark.slow
def test_unused_suppression_warns_on_stderr_and_in_the_reports(seed, project, capsys):
    (project / "mtplint.toml").write_text(
        f'[[suppress]]\nid = "MTP001:{SEED_ENTRY}"\nreason = "kept on purpose"\n\n'
        '[[suppress]]\nid = "MTP004:model.layers.43.mtp_block.head"\nreason = "was fixed upstream"\n\n'
        '[[suppress]]\ncode = "MTP013"\nlocation = "*"\npath = "elsewhere/*"\nreason = "another checkpoint"\n'
    )
    sarif_out = project / "r.sarif"
    rc, report = _lint(seed, project, "--format", "sarif", "--output", sarif_out)
    assert rc == 1  # an unused suppression is about the config: it never changes the outcome
    err = capsys.readouterr().err
    assert (
        "mtplint: warning: unused suppression [[suppress]] entry 2 "
        '(id = "MTP004:model.layers.43.mtp_block.head") in ./mtplint.toml:5: it matches no finding'
    ) in err, err
    assert err.count("unused suppression") == 1, err  # entry 3 is for another checkpoint: idle, not unused
    (unused,) = report["unused_suppressions"]
    assert (unused["entry"], unused["line"], unused["id"]) == (2, 5, "MTP004:model.layers.43.mtp_block.head")
    (invocation,) = json.loads(sarif_out.read_text())["runs"][0]["invocations"]
    assert "entry 2" in invocation["toolConfigurationNotifications"][0]["message"]["text"]

    # A suppression of a rule this run does not evaluate is idle, not unused.
    rc, report = _lint(seed, project, "--select", "MTP001,MTP002")
    assert "unused suppression" not in capsys.readouterr().err
    assert "unused_suppressions" not in report
