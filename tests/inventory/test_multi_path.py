"""`mtplint check A B hf://org/x ...` (issue 12): every PATH linted as on its own, one report per
--format (lint/reporters/report_set.py), the worst exit code, a bad PATH named and the others
still reported, Ctrl-C at once, baselines refused.

Most tests lint two fixture checkpoints through the real command line with their rule cases'
recorded probe reports standing in for the vLLM child (tests/support/recorded_cli.py); one lints them
through the real probe."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from mtplint.core.errors import ProbeFailure
from mtplint.core.findings import Finding, Location, RunResult
from mtplint.core.probe_summary import ProbedVllm
from mtplint.core.run_inputs import RunInputs
from mtplint.reporters.json_report import load_schema
from mtplint.reporters.report_set import (
    Checked,
    NotLinted,
    labels,
    load_set_schema,
    render_set,
    summary,
    worst_exit,
)
from paths import ROOT
from recorded_cases import read_recorded
from recorded_cli import case_checkpoint, mtplint

from fixtures.build import cached_build

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")

REPO = ROOT
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"
CLEAN = "qwen35-bf16-official"  # no findings
BROKEN = "qwen35-mtp-advertised-not-shipped"  # MTP006 (error) with 12 MTP005 consequences
ALL_FORMATS = ["text", "json", "sarif", "junit", "github"]


# ---- helpers ----------------------------------------------------------------------------------


def _missing_line() -> str:
    """The line for `missing` (a PATH that does not exist) in the working directory."""
    return f"mtplint: error: {Path('missing').resolve()}: no such checkpoint directory"


def _validator(schema: dict, *others: dict):
    registry = referencing.Registry().with_resources(
        [(s["$id"], referencing.Resource.from_contents(s)) for s in (schema, *others) if "$id" in s]
    )
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=registry)


def _validate_set(doc: dict) -> None:
    _validator(load_set_schema(), load_schema()).validate(doc)
    for report in doc["reports"]:
        _validator(load_schema()).validate(report)


def _sarif_validator():
    return _validator(json.loads(SARIF_SCHEMA.read_text()))


def _junit_cases(xml: str) -> list[tuple[str, str, ET.Element]]:
    root = ET.fromstring(xml)
    return [(suite.get("name"), case, suite) for suite in root.iter("testsuite") for case in suite.iter("testcase")]


def _copy(src: Path, dest: Path) -> None:
    # Fixture shards are sparse (gigabytes logical, kilobytes on disk): a plain copy would write them out.
    subprocess.run(["cp", "-r", "--sparse=always", str(src), str(dest)], check=True)


def _stand_in(monkeypatch, cases: dict[str, str], cache_dir: Path, fail: dict[str, BaseException] | None = None):
    """The probe child answers with the recorded report of the case mapped to the checkpoint
    (by its real path, or by `hf://org/name` for a hub repository); `fail` raises instead.
    Returns the checkpoints the child was started for, in order."""
    from mtplint.probe import runner
    from mtplint.probe.report import ProbeReport

    def key(text: str) -> str:
        return text.partition("@")[0] if text.startswith("hf://") else os.path.realpath(text)

    by_key = {key(p): c for p, c in cases.items()}
    failing = {key(p): exc for p, exc in (fail or {}).items()}
    probed: list[str] = []

    def child(inventory, request, *_rest):  # (tmp, [identity,] progress)
        k = key(inventory.origin or str(inventory.root))
        probed.append(k)
        if k in failing:
            raise failing[k]
        assert k in by_key, f"no recorded case stands in for {k}"
        report = ProbeReport.from_json(read_recorded(by_key[k])["report"])
        report.request = request.modelled()  # the report says what it modelled: what was asked
        return report

    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(runner, "_run_child", child)
    return probed


@pytest.fixture
def two(tmp_path, monkeypatch):
    """`clean/` and `broken/` in the working directory, the recorded probe standing in."""
    monkeypatch.chdir(tmp_path)
    for var in ("NO_COLOR", "FORCE_COLOR", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(var, raising=False)
    _copy(case_checkpoint(CLEAN), tmp_path / "clean")
    _copy(case_checkpoint(BROKEN), tmp_path / "broken")
    probed = _stand_in(monkeypatch, {"clean": CLEAN, "broken": BROKEN}, tmp_path / "cache")
    return probed


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = mtplint(*argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


# ---- the command line, recorded probe ----------------------------------------------------------


@pytest.mark.slow
def test_text_is_each_checkpoints_own_report_then_one_line(two, capsys):
    singles = {}
    for name in ("clean", "broken"):
        rc, singles[name], _ = _run(capsys, name, "--no-cache")
        assert rc == (1 if name == "broken" else 0), _
    rc, out, err = _run(capsys, "clean", "broken", "missing", "--no-cache")
    assert rc == 2  # the missing directory: bad input outranks the findings
    assert out == (
        f"==> clean <==\n{singles['clean']}\n"
        f"==> broken <==\n{singles['broken']}\n"
        f"==> missing <==\n{_missing_line()}\n\n"
        "3 checkpoints: 1 with errors, 1 clean, 1 not linted\n"
    )
    # The bad PATH's usual line on stderr, once; the others were probed all the same.
    assert err.count(_missing_line()) == 1
    assert [os.path.basename(p) for p in two[-2:]] == ["clean", "broken"]


def test_one_path_is_unchanged(two, capsys):
    """One PATH never goes through the set: its documents are the single-checkpoint ones."""
    out_dir = Path("out")
    out_dir.mkdir()
    args = [a for f in ALL_FORMATS for a in ("--format", f, "--output", str(out_dir / f))]
    rc, out, _err = _run(capsys, "broken", *args)
    assert rc == 1 and out == ""
    text = (out_dir / "text").read_text()
    assert "==>" not in text and "checkpoint" not in text.splitlines()[-1]
    assert json.loads((out_dir / "json").read_text())["schema"] == "mtplint/report/v1"
    sarif = json.loads((out_dir / "sarif").read_text())
    assert len(sarif["runs"]) == 1 and "ckpt=" not in sarif["runs"][0]["automationDetails"]["id"]
    assert all("[" not in case.get("name") for _, case, _ in _junit_cases((out_dir / "junit").read_text()))
    assert "::group::" not in (out_dir / "github").read_text()


@pytest.mark.slow
def test_every_format_is_one_document(two, capsys, monkeypatch, tmp_path):
    summary_md = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_md))
    out_dir = Path("out")
    out_dir.mkdir()
    singles = {}
    for name in ("clean", "broken"):
        _run(
            capsys,
            name,
            "--no-cache",
            "--format",
            "json",
            "--output",
            f"{name}.json",
            "--format",
            "sarif",
            "--output",
            f"{name}.sarif",
        )
        singles[name] = (json.loads(Path(f"{name}.json").read_text()), json.loads(Path(f"{name}.sarif").read_text()))
    single_md = summary_md.read_text()
    summary_md.unlink()
    args = [a for f in ALL_FORMATS for a in ("--format", f, "--output", str(out_dir / f))]
    rc, out, _err = _run(capsys, "clean", "broken", "missing", "--no-cache", *args)
    assert rc == 2 and out == ""

    doc = json.loads((out_dir / "json").read_text())
    _validate_set(doc)
    assert doc["schema"] == "mtplint/report-set/v1"
    assert [r["inputs"]["path"] for r in doc["reports"]] == ["clean", "broken"]
    [missing] = doc["not_linted"]
    assert (missing["path"], missing["exit_code"]) == ("missing", 2)
    assert missing["message"] == _missing_line()
    for name, report in zip(("clean", "broken"), doc["reports"], strict=True):
        assert report == singles[name][0]  # each item is the checkpoint's own v1 report

    sarif = json.loads((out_dir / "sarif").read_text())
    _sarif_validator().validate(sarif)
    assert len(sarif["runs"]) == 2  # the missing PATH has no run: an empty one would close its alerts
    categories = [r["automationDetails"]["id"] for r in sarif["runs"]]
    assert categories == [
        "mtplint/ckpt=clean/gpu=h100/tp=1/n=1/vllm=0.33.0/",
        "mtplint/ckpt=broken/gpu=h100/tp=1/n=1/vllm=0.33.0/",
    ]
    for name, run in zip(("clean", "broken"), sarif["runs"], strict=True):
        single_run = singles[name][1]["runs"][0]
        assert {**run, "automationDetails": None} == {**single_run, "automationDetails": None}
    assert len(sarif["runs"][1]["results"]) == 13 and not sarif["runs"][0]["results"]
    uris = {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for r in sarif["runs"][1]["results"]
        for loc in r["locations"]
    }
    assert uris == {"broken/config.json"}  # each run's own prefix

    cases = _junit_cases((out_dir / "junit").read_text())
    assert [s.get("name") for s in ET.fromstring((out_dir / "junit").read_text()).iter("testsuite")] == [
        "clean",
        "broken",
        "missing",
    ]
    pairs = [(case.get("classname"), case.get("name")) for _, case, _ in cases]
    rules = len(list((ROOT / "rules").glob("MTP*.toml")))
    assert len(pairs) == len(set(pairs)) == rules + rules + 1  # a case per rule and checkpoint, one for the missing
    failed = {(s, c.get("name")) for s, c, _ in cases if c.find("failure") is not None}
    assert failed == {
        ("broken", "MTP005 draft-parameter-never-loaded [broken]"),
        ("broken", "MTP006 mtp-layers-missing [broken]"),
    }
    errored = [c for s, c, _ in cases if c.find("error") is not None]
    assert len(errored) == 1 and "no such checkpoint directory" in errored[0].find("error").get("message")

    github = (out_dir / "github").read_text().splitlines()
    assert github[0].startswith("::error title=mtplint%3A missing not linted::")
    assert github.count("::group::mtplint: clean") == 1 and github.count("::group::mtplint: broken") == 1
    assert sum(line.startswith("::error file=broken/config.json") for line in github) == 13
    assert github[-1] == "3 checkpoints: 1 with errors, 1 clean, 1 not linted"

    md = summary_md.read_text()
    assert md.startswith(single_md + "## mtplint: `missing`\n\nnot linted: mtplint: error: ")
    assert md.endswith("/missing: no such checkpoint directory\n") and md.count("## mtplint: ") == 3
    assert (out_dir / "text").read_text().endswith("3 checkpoints: 1 with errors, 1 clean, 1 not linted\n")


@pytest.mark.slow
def test_exit_code_is_the_worst_path(two, capsys):
    assert _run(capsys, "clean", "clean")[0] == 0
    assert _run(capsys, "clean", "broken")[0] == 1
    assert _run(capsys, "clean", "broken", "--fail-on", "error", "--ignore", "MTP005,MTP006")[0] == 0
    assert _run(capsys, "missing", "broken")[0] == 2


def test_a_probe_failure_is_exit_3_and_the_others_are_reported(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _copy(case_checkpoint(CLEAN), tmp_path / "clean")
    _copy(case_checkpoint(BROKEN), tmp_path / "broken")
    crash = ProbeFailure("the probe crashed: SIGSEGV")
    _stand_in(monkeypatch, {"clean": CLEAN}, tmp_path / "cache", fail={"broken": crash})
    rc, out, err = _run(capsys, "broken", "missing", "clean", "--format", "json")
    assert rc == 3  # internal/probe failure outranks bad input
    doc = json.loads(out)
    _validate_set(doc)
    assert [r["inputs"]["path"] for r in doc["reports"]] == ["clean"]
    assert [(n["path"], n["exit_code"]) for n in doc["not_linted"]] == [("broken", 3), ("missing", 2)]
    assert "mtplint: error: the probe crashed: SIGSEGV" in err


def test_ctrl_c_stops_at_once_with_130(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _copy(case_checkpoint(CLEAN), tmp_path / "clean")
    _copy(case_checkpoint(BROKEN), tmp_path / "broken")
    probed = _stand_in(monkeypatch, {"clean": CLEAN}, tmp_path / "cache", fail={"broken": KeyboardInterrupt()})
    rc, out, err = _run(capsys, "clean", "broken", "clean", "--format", "json")
    assert rc == 130
    assert out == ""  # no report
    assert len(probed) == 2  # the third PATH was not started
    assert err.rstrip().endswith("mtplint: interrupted")


@pytest.mark.parametrize("option", ["--baseline", "--write-baseline"])
def test_a_baseline_takes_one_path(two, capsys, option):
    Path("base.json").write_text('{"schema": "mtplint/baseline/v1", "findings": []}')
    rc, out, err = _run(capsys, "clean", "broken", option, "base.json")
    assert rc == 2 and out == ""
    assert err.splitlines() == [
        f"mtplint: error: {option} takes one PATH: a baseline records one checkpoint's findings by id; "
        "lint each checkpoint with its own baseline"
    ]
    assert two == []  # nothing probed


def test_a_usage_error_shared_by_every_path_is_one_line_before_any_probe(two, capsys):
    rc, out, err = _run(capsys, "clean", "broken", "--select", "MTP0O1")
    assert rc == 2 and out == "" and two == []
    assert len(err.splitlines()) == 1 and "unknown rule code 'MTP0O1'" in err


def test_a_checkpoints_own_settings_apply_to_it_only(two, capsys):
    (Path("broken") / "mtplint.toml").write_text("num-speculative-tokens = 2\n")
    _rc, out, err = _run(capsys, "clean", "broken", "--format", "json")
    doc = json.loads(out)
    assert [r["inputs"]["num_speculative_tokens"] for r in doc["reports"]] == [1, 2]
    assert [r["inputs"]["settings_files"] for r in doc["reports"]] == [
        [],
        [{"path": "broken/mtplint.toml", "source": "checkpoint"}],
    ]
    assert "mtplint: settings from broken/mtplint.toml (checkpoint: deploy inputs only)" in err


def test_the_same_path_twice_stays_apart(two, capsys):
    rc, _out, _err = _run(
        capsys, "broken", "broken", "--format", "junit", "--format", "sarif", "--output", "j.xml", "--output", "s.sarif"
    )
    assert rc == 1
    pairs = [(c.get("classname"), c.get("name")) for _, c, _ in _junit_cases(Path("j.xml").read_text())]
    _run(capsys, "broken", "--format", "junit", "--output", "one.xml")
    once = _junit_cases(Path("one.xml").read_text())
    assert len(pairs) == len(set(pairs)) == 2 * len(once) > 0
    sarif = json.loads(Path("s.sarif").read_text())
    _sarif_validator().validate(sarif)
    ids = [r["automationDetails"]["id"] for r in sarif["runs"]]
    assert len(set(ids)) == 2 and "ckpt=broken-2/" in ids[1]


@pytest.mark.slow
def test_local_and_hub_paths_mixed(two, capsys, monkeypatch, tmp_path):
    from hub_server import HubServer, point_client_at

    with HubServer() as hub:
        hub.add("org/broken", case_checkpoint(BROKEN))
        point_client_at(hub, monkeypatch, tmp_path)
        _stand_in(monkeypatch, {"clean": CLEAN, "hf://org/broken": BROKEN}, tmp_path / "cache")
        rc, out, err = _run(capsys, "clean", "hf://org/broken", "hf://org/nothing-here", "--format", "json")
        commit = hub.repos["org/broken"].commit
    assert rc == 2
    doc = json.loads(out)
    _validate_set(doc)
    assert [r["inputs"]["path"] for r in doc["reports"]] == ["clean", f"hf://org/broken@{commit}"]
    assert [r["summary"]["error"] for r in doc["reports"]] == [0, 13]
    [bad] = doc["not_linted"]
    assert bad["path"] == "hf://org/nothing-here" and bad["exit_code"] == 2
    assert "org/nothing-here" in bad["message"] and bad["message"] in err


# ---- the combining functions ------------------------------------------------------------------


def _result(path: str, *severities: str) -> RunResult:
    findings = [
        Finding(
            code="MTP013", name="x", severity=s, message=f"m{i}", location=Location(file="config.json"), key=f"k{i}"
        )
        for i, s in enumerate(severities)
    ]
    return RunResult(findings=findings, rules_evaluated=[], vllm=ProbedVllm("0.33.0"), inputs=RunInputs(path=path))


def test_summary_counts_each_checkpoint_by_its_worst_finding():
    entries = [
        Checked("a", _result("a", "info", "error")),
        Checked("b", _result("b", "warning", "info")),
        Checked("c", _result("c", "info")),
        Checked("d", _result("d")),
        Checked("e", _result("e")),
        NotLinted("f", 2, "mtplint: error: f: no such checkpoint directory"),
    ]
    assert summary(entries) == "6 checkpoints: 1 with errors, 1 with warnings, 1 with info, 2 clean, 1 not linted"
    assert summary(entries[3:4]) == "1 checkpoint: 1 clean"
    assert labels([Checked("a", _result("a")), NotLinted("a", 2, "x"), Checked("a", _result("a"))]) == [
        "a",
        "a (2)",
        "a (3)",
    ]


def test_worst_exit_precedence():
    assert worst_exit([]) == 0
    assert worst_exit([0, 1, 0]) == 1
    assert worst_exit([1, 2, 0]) == 2
    assert worst_exit([2, 3, 1]) == 3


def test_render_set_documents_validate_without_a_probe():
    entries = [
        Checked("a", _result("a", "error", "warning")),
        NotLinted("b", 3, "mtplint: error: probe crashed"),
        Checked("c", _result("c")),
    ]
    doc = json.loads(render_set(entries, "json", {}))
    _validate_set(doc)
    broken = {**doc, "reports": [{**doc["reports"][0], "summary": None}]}
    assert not _validator(load_set_schema(), load_schema()).is_valid(broken)  # items are checked against v1
    sarif = json.loads(render_set(entries, "sarif", {}))
    _sarif_validator().validate(sarif)
    assert len(sarif["runs"]) == 2
    with pytest.raises(ValueError, match="unknown report format"):
        render_set(entries, "yaml", {})


@pytest.mark.probe
def test_the_real_probe_clean_broken_and_missing_in_one_run(tmp_path, monkeypatch, capsys):
    """Each checkpoint through the vLLM probe (two probes), every format to its own file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    clean, broken = cached_build(CLEAN), cached_build(BROKEN)
    args = [a for f in ALL_FORMATS for a in ("--format", f, "--output", str(tmp_path / f"report.{f}"))]
    rc, out, err = _run(capsys, clean, broken, tmp_path / "missing", *args)
    assert rc == 2, err  # the missing PATH, yet both real reports are there
    assert out == ""

    doc = json.loads((tmp_path / "report.json").read_text())
    _validate_set(doc)
    assert [r["inputs"]["path"] for r in doc["reports"]] == [str(clean), str(broken)]
    assert [r["summary"]["error"] for r in doc["reports"]] == [0, 13]
    assert all(r["probe"]["cached"] is False for r in doc["reports"])
    assert {f["code"] for f in doc["reports"][1]["findings"]} == {"MTP005", "MTP006"}
    assert [n["path"] for n in doc["not_linted"]] == [str(tmp_path / "missing")]

    sarif = json.loads((tmp_path / "report.sarif").read_text())
    _sarif_validator().validate(sarif)
    assert len(sarif["runs"]) == 2 and len({r["automationDetails"]["id"] for r in sarif["runs"]}) == 2

    junit = (tmp_path / "report.junit").read_text()
    assert len(list(ET.fromstring(junit).iter("testsuite"))) == 3
    pairs = [(c.get("classname"), c.get("name")) for _, c, _ in _junit_cases(junit)]
    assert len(pairs) == len(set(pairs))

    text = (tmp_path / "report.text").read_text()
    assert text.count("==> ") == 3 and text.endswith("3 checkpoints: 1 with errors, 1 clean, 1 not linted\n")
    github = (tmp_path / "report.github").read_text()
    assert github.count("::group::") == 2 and github.endswith("3 checkpoints: 1 with errors, 1 clean, 1 not linted\n")
    assert (tmp_path / "summary.md").read_text().count("## mtplint: ") == 3
