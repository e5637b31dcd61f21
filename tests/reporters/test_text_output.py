"""The default text report (issue 15): one line per root cause with a real `path:line`, a
summary that agrees with itself, `--output-format full` / `-v` with the draft's module table,
`--statistics`, and colour as NO_COLOR / FORCE_COLOR / TERM=dumb / --color say.

The demo checkpoint (`make demo`) is linted through the real CLI with its recorded probe
report standing in for the vLLM child (tests/support/recorded_cli.py)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from mtplint.reporters.color import use_color
from mtplint.reporters.lines import display_path, json_line
from paths import ROOT
from recorded_cli import case_checkpoint, mtplint, stand_in

DEMO = "dsv4-w4a16-bf16-mtp"  # `make demo`: dsv4-flash-w4a16-bf16mtp, default options
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ROOT_LINE = re.compile(r"^(?P<path>\S+?):(?:(?P<line>\d+):)? (?P<code>MTP\d{3}) (?P<name>[a-z0-9-]+): (?P<msg>.*)$")
SUMMARY = "1 root cause (1 error), 10 consequences; 11 findings in 3 rules; probed vLLM 0.33.0"


@pytest.fixture
def demo(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for var in ("NO_COLOR", "FORCE_COLOR", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(var, raising=False)
    path = case_checkpoint(DEMO)
    stand_in(monkeypatch, {path: DEMO}, tmp_path / "cache")
    return path


def _entry_line(config: Path, entry: str) -> int:
    needle = json.dumps(entry)
    return next(i for i, ln in enumerate(config.read_text().splitlines(), 1) if needle in ln)


@pytest.mark.slow
def test_demo_reads_in_a_few_lines(demo, capsys):
    rc = mtplint(demo)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert rc == 1
    assert len(lines) <= 25, out  # was 77
    assert not ANSI.search(out)  # not a terminal
    root = ROOT_LINE.match(lines[0])
    assert root, lines[0]
    # The exact entry's line in config.json, not the line of the "ignore" key.
    assert root["path"] == str(demo / "config.json")  # outside the working directory: absolute
    assert int(root["line"]) == _entry_line(demo / "config.json", "re:.*mtp.*")
    assert (root["code"], root["name"]) == ("MTP001", "exclusion-entry-matches-nothing")
    assert root["msg"].endswith("(+10 consequences)")
    assert lines[1] == f"  fix: mtplint fix {demo} --only rewrite-ignore-to-runtime-names"
    assert not [ln for ln in lines if "MTP002" in ln or "MTP005" in ln]  # consequences are counted, not listed
    assert lines[-1].startswith(SUMMARY)


@pytest.mark.slow
def test_paths_are_relative_to_the_working_directory(demo, capsys, monkeypatch):
    monkeypatch.chdir(demo.parent)
    mtplint(demo.name)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"{demo.name}/config.json:{_entry_line(demo / 'config.json', 're:.*mtp.*')}: MTP001 ")
    assert display_path("/elsewhere/ckpt", "config.json", cwd=str(demo)) == "/elsewhere/ckpt/config.json"
    assert display_path("ckpt", "model.safetensors", cwd="/x") == "ckpt/model.safetensors"


@pytest.mark.parametrize("flag", [["-v"], ["--output-format", "full"]])
@pytest.mark.slow
def test_full_output_keeps_the_tree_and_adds_the_module_table(demo, capsys, flag):
    rc = mtplint(demo, *flag)
    lines = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert lines[0] == "Errors (1 root cause, +10 consequences)"
    assert sum("-> error MTP002" in ln for ln in lines) == 5
    assert sum("-> error MTP005" in ln for ln in lines) == 5
    assert any("KeyError" in ln for ln in lines)  # evidence
    # Each fix command once per tree, not under each of the five MTP002s.
    assert sum("--only ignore-unquantized-mtp-block" in ln for ln in lines) == 1
    table = lines[lines.index("Draft modules") + 1 :]
    assert re.match(r"\s+draft module\s+on disk\s+vLLM builds\s+outcome$", table[0])
    rows = {re.split(r"\s{2,}", ln.strip())[0]: re.split(r"\s{2,}", ln.strip())[1:] for ln in table[1:] if ln.strip()}
    experts = next(v for k, v in rows.items() if k.startswith("mtp.0.ffn.experts.*"))
    assert experts == ["bf16", "CompressedTensorsWNA16MoEMethod", "MTP002, MTP005"]
    assert rows["mtp.0.attn.wq_b"] == ["bf16", "CompressedTensorsW8A8Fp8", "MTP002, MTP005"]
    assert rows["mtp.0.e_proj"] == ["bf16", "unquantized", "ok"]
    assert lines[-1].startswith(SUMMARY)


@pytest.mark.slow
def test_statistics(demo, capsys):
    rc = mtplint(demo, "--statistics")
    lines = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert [re.split(r"\s{2,}", ln.strip()) for ln in lines[:3]] == [
        ["5", "MTP002", "error", "quantized-layer-fed-unquantized", "(5 consequences)"],
        ["5", "MTP005", "error", "draft-parameter-never-loaded", "(5 consequences)"],
        ["1", "MTP001", "error", "exclusion-entry-matches-nothing", "(1 root cause)"],
    ]
    assert lines[-1].startswith(SUMMARY)


@pytest.mark.slow
def test_summary_agrees_with_the_json_report(demo, capsys):
    mtplint(demo, "--format", "json", "--output", "r.json", "--format", "text", "--output", "r.txt")
    report = json.loads(Path("r.json").read_text())
    summary = Path("r.txt").read_text().splitlines()[-1]
    findings = report["findings"]
    roots = [f for f in findings if not f["caused_by"]]
    assert summary.startswith(
        f"{len(roots)} root cause ({len(roots)} error), {len(findings) - len(roots)} consequences; "
        f"{len(findings)} findings in {len({f['code'] for f in findings})} rules;"
    )


# ---- colour -----------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("mode", "env", "tty", "expected"),
    [
        ("auto", {}, True, True),
        ("auto", {}, False, False),
        ("auto", {"NO_COLOR": "1"}, True, False),
        ("auto", {"NO_COLOR": ""}, True, True),  # an empty NO_COLOR does not disable colour
        ("auto", {"FORCE_COLOR": "1"}, False, True),
        ("auto", {"FORCE_COLOR": ""}, False, False),
        ("auto", {"TERM": "dumb"}, True, False),
        ("auto", {"TERM": "dumb", "FORCE_COLOR": "1"}, True, True),
        ("auto", {"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
        ("always", {"NO_COLOR": "1", "TERM": "dumb"}, False, True),
        ("never", {"FORCE_COLOR": "1"}, True, False),
    ],
)
def test_use_color(mode, env, tty, expected):
    assert use_color(mode, _Tty() if tty else io.StringIO(), env) is expected


@pytest.mark.slow
def test_color_option_and_environment_reach_the_report(demo, capsys, monkeypatch):
    def report(*args: str) -> str:
        mtplint(demo, *args)
        return capsys.readouterr().out.replace(", cached", "")  # the first run fills the probe cache

    colored = report("--color", "always")
    assert ANSI.search(colored)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert report() == colored
    monkeypatch.setenv("NO_COLOR", "1")
    plain = report()
    assert not ANSI.search(plain) and ANSI.sub("", colored) == plain
    assert report("--color", "always") == colored  # the option wins over the environment
    monkeypatch.delenv("NO_COLOR")
    assert report("--color", "never") == plain


def test_no_hand_written_ansi_colours_left():
    # Colours go through click.style; the live progress line's erase (ESC [ K) has no such helper.
    lint = ROOT / "lint"
    offenders = [str(p) for p in lint.rglob("*.py") if re.search(r"\\(x1b|033)\[[0-9;]*m", p.read_text())]
    assert offenders == []


# ---- the line of an entry ---------------------------------------------------------------------


def test_json_line_finds_the_entry_not_the_key():
    text = json.dumps({"ignore": ["top"], "quantization_config": {"ignore": ["lm_head", "re:.*mtp.*"]}}, indent=2)
    # 1 {  2 "ignore": [  3 "top"  4 ],  5 "quantization_config": {  6 "ignore": [  7 "lm_head",  8 "re:.*mtp.*"
    assert json_line(text, ["quantization_config", "ignore"], ["re:.*mtp.*"]) == 8
    assert json_line(text, ["quantization_config", "ignore"], ["not there"]) == 6  # the key's line
    assert json_line(text, ["ignore"], ["top"]) == 3
    assert json_line(text, ["quantization_config", "missing"]) is None
    assert json_line('{"a": 1,\n "a": {"b": 2}}', ["a", "b"]) == 2  # the last of a repeated key, as json.load
    assert json_line('{"dynamic": {\n"-:re:x": {}}}', ["dynamic"], ["-:re:x"]) == 2  # GPTQ's object of entries
    assert json_line('{"a": [1,', ["a"], ["x"]) is None  # malformed: no line, no exception
