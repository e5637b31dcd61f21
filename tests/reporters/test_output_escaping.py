"""Names from a checkpoint never reach the terminal (or a CI log, XML or JSON file) raw.

A shard or tensor name can hold ESC sequences (clear screen, set the window title), newlines that
forge output lines, bidi overrides and lone surrogates; every output format escapes them visibly
while ordinary names print exactly as before.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from mtplint.core.errors import BadInput
from mtplint.core.findings import Finding, Fixes, Location, RunResult
from mtplint.core.probe_summary import ProbedVllm
from mtplint.core.run_inputs import RunInputs
from mtplint.core.textsafe import json_safe, terminal_safe, terminal_safe_lines
from mtplint.reporters import render
from mtplint.reporters.github import step_summary

from fixtures.sparse import write_sparse

MTPLINT = [sys.executable, "-m", "mtplint"]
CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"
EVIL = f"mtp{CLEAR}{TITLE}\nfix: rm -rf ~\u202egnp.exe\x9b31m\x7f\ud800"
# Raw controls a report must never contain: C0 except newline, DEL, C1, bidi, separators, surrogates.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


# ---- the escaping function ----------------------------------------------------------------------


def test_terminal_safe_escapes_controls_visibly():
    assert terminal_safe(CLEAR + TITLE) == "\\x1b[2J\\x1b]0;pwned\\x07"
    assert terminal_safe("a\nb\r\tc") == "a\\nb\\r\\tc"
    assert terminal_safe("\x7f\x85\x9b") == "\\x7f\\x85\\x9b"
    assert terminal_safe("abc\u202edef\u2066\u2069") == "abc\\u202edef\\u2066\\u2069"
    assert terminal_safe("x\ud800y\udfff") == "x\\ud800y\\udfff"
    assert terminal_safe("l1\u2028l2") == "l1\\u2028l2"
    assert terminal_safe_lines("a\x1b\n\tb\r") == "a\\x1b\n\tb\\r"


@pytest.mark.parametrize(
    "name",
    [
        "model.layers.43.mlp.experts.0.w1.weight",
        r"re:^model\.layers\.43\.",
        "model-00001-of-00046.safetensors",
        "模型.层.0 ü é ß — ✓ \U0001d538",
        "quantization_config.ignore[3] 'x' \"y\" 100% a,b:c",
    ],
)
def test_ordinary_names_are_unchanged(name):
    assert terminal_safe(name) == name
    assert terminal_safe_lines(name) == name


def test_json_safe_keeps_the_data_and_leaves_no_raw_control():
    doc = {"name": EVIL, "n": [1, 2]}
    for ascii_only in (True, False):
        text = json_safe(json.dumps(doc, indent=2, ensure_ascii=ascii_only))
        assert not RAW.search(text)
        assert json.loads(text) == doc
    assert json_safe('{"a": "\u00e9"}') == '{"a": "\u00e9"}'


def test_one_line_error_escapes_path_and_message():
    err = BadInput(f"weight_map names shard {EVIL} which does not exist", path=f"/ck/{CLEAR}index.json")
    line = err.one_line()
    assert not RAW.search(line) and "\n" not in line
    assert "\\x1b[2J" in line and "\\x1b]0;pwned\\x07" in line and "\\u202e" in line and "\\n" in line
    assert BadInput("config.json: bad key", path="/models/x").one_line() == "/models/x: config.json: bad key"


# ---- the CLI: one line, exit 2 ------------------------------------------------------------------


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MTPLINT, *args], capture_output=True, text=True, timeout=120)


def _assert_one_safe_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert not RAW.search(proc.stderr), ascii(proc.stderr)
    assert not RAW.search(proc.stdout), ascii(proc.stdout)
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
    return proc.stderr


def _ckpt(tmp_path: Path) -> Path:
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "llama"}')
    return d


def test_missing_shard_with_escapes_in_its_name_is_one_safe_line(tmp_path):
    d = _ckpt(tmp_path)
    shard = f"model{CLEAR}{TITLE}\n-00002.safetensors"
    tensor = f"lm{CLEAR}\nhead.weight"
    write_sparse(d / "model-00001.safetensors", [("a", "BF16", (4, 4))])
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {"a": "model-00001.safetensors", tensor: shard}})
    )
    _assert_one_safe_line(_run(str(d)), "model\\x1b[2J\\x1b]0;pwned\\x07\\n-00002.safetensors")


@pytest.mark.slow
def test_unreadable_shard_whose_file_name_holds_escapes_is_one_safe_line(tmp_path):
    d = _ckpt(tmp_path)
    (d / f"evil{CLEAR}{TITLE}\nx.safetensors").write_bytes((1000).to_bytes(8, "little") + b'{"w": ')
    _assert_one_safe_line(_run(str(d)), "evil\\x1b[2J\\x1b]0;pwned\\x07\\nx.safetensors")


@pytest.mark.slow
def test_tensor_name_with_escapes_in_a_header_error_is_one_safe_line(tmp_path):
    d = _ckpt(tmp_path)
    tensor = f"a{CLEAR}{TITLE}\nb\u202e"
    write_sparse(d / "model-00001-of-00001.safetensors", [("ok.weight", "BF16", (4, 4))])
    (d / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "metadata": {},
                "weight_map": {
                    "ok.weight": "model-00001-of-00001.safetensors",
                    tensor: "model-00001-of-00001.safetensors",
                },
            }
        )
    )
    _assert_one_safe_line(_run(str(d)), "\\x1b[2J")


# ---- every report format ------------------------------------------------------------------------


@pytest.fixture
def evil_result() -> RunResult:
    cause = Finding(
        code="MTP002",
        name="quantized-layer-fed-unquantized",
        severity="error",
        message=f"{EVIL} is built quantized but stored as bf16",
        location=Location(file=f"shard{CLEAR}\n.safetensors", tensor=f"{EVIL}.weight", config_key=f"k{TITLE}"),
        evidence={"exception": f"Traceback:\n  line 1\nKeyError: '{EVIL}'", "tensors": [EVIL, "ok"], "map": {EVIL: 1}},
        fixes=Fixes(artifact=["ignore-unquantized-mtp-block"]),
        key=EVIL,
    )
    consequence = Finding(
        code="MTP005",
        name="draft-parameter-never-loaded",
        severity="error",
        message=f"parameter {EVIL} is never loaded",
        location=Location(file="config.json", tensor=EVIL),
        caused_by=cause.id,
        key=f"{EVIL}.p",
    )
    warning = Finding(
        code="MTP001",
        name="exclusion-entry-matches-nothing",
        severity="warning",
        message=f"entry 're:{EVIL}' [x](https://evil) <img src=x> **b** matches nothing",
        location=Location(file="config.json", config_key="quantization_config.ignore"),
        key="entry",
    )
    return RunResult(
        findings=[cause, consequence, warning],
        rules_evaluated=[
            {"code": c, "name": n, "severity": "error", "summary": "s"}
            for c, n in (("MTP001", "a"), ("MTP002", "b"), ("MTP005", "c"))
        ],
        vllm=ProbedVllm("0.33.0", f"abc{CLEAR}"),
        inputs=RunInputs(path=f"/models/{CLEAR}ckpt", gpu=EVIL),
    )


@pytest.mark.parametrize("color", [False, True])
def test_text_report_has_no_raw_control(evil_result, color):
    out = render(evil_result, "text", {}, color=color)
    if color:  # the report's own colours are the only escape sequences
        out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert not RAW.search(out), ascii(out)
    assert "mtp\\x1b[2J\\x1b]0;pwned\\x07\\nfix: rm -rf ~\\u202egnp.exe\\x9b31m\\x7f\\ud800" in out
    # The forged "fix:" stays inside its line: the only fix line is mtplint's own.
    assert [ln.strip() for ln in out.splitlines() if ln.strip().startswith("fix:")] == [
        "fix: mtplint fix '/models/\\x1b[2Jckpt' --only ignore-unquantized-mtp-block"
    ]
    out.encode("utf-8")  # no lone surrogate left to crash the writer


def test_github_annotations_have_no_raw_control_and_one_line_each(evil_result):
    out = render(evil_result, "github", {})
    assert not RAW.search(out), ascii(out)
    lines = out.splitlines()
    commands = [ln for ln in lines if ln.startswith("::")]
    assert len(commands) == 3 and len(lines) == 4  # three annotations and the summary line
    for cmd in commands:
        _props, data = cmd.split("::", 2)[1:]
        assert "\n" not in data and "\r" not in data
    error = commands[0]
    assert error.startswith("::error file=shard\\x1b[2J\\n.safetensors,title=MTP002 ")
    assert "%0Aat shard\\x1b[2J\\n.safetensors%3A" not in error  # colons in data stay literal
    assert "%0Aat shard\\x1b[2J\\n.safetensors:mtp\\x1b[2J" in error


def test_step_summary_has_no_raw_control_and_no_markup(evil_result):
    out = step_summary(evil_result)
    assert not RAW.search(out), ascii(out)
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and "---" not in ln]
    assert len(rows) == 4  # header + 3 findings: no newline broke a row
    assert all(ln.count(" | ") == 4 for ln in rows)
    warning = next(r for r in rows if "MTP001" in r)
    assert "\\[x\\](https://evil) \\<img src=x\\> \\*\\*b\\*\\*" in warning
    assert "re:mtp\\\\x1b\\[2J" in warning  # the visible escape's backslash survives Markdown


def test_junit_is_valid_xml_and_keeps_the_escapes_visible(evil_result):
    out = render(evil_result, "junit", {}, fail_on="warning")
    assert not RAW.search(out.replace("\t", " ")), ascii(out)  # junit-xml indents with tabs
    root = ET.fromstring(out.encode("utf-8"))
    failures = root.findall(".//failure")
    assert len(failures) == 3
    text = " ".join((f.get("message") or "") + (f.text or "") for f in failures)
    assert "mtp\\x1b[2J\\x1b]0;pwned\\x07\\nfix: rm -rf ~\\u202egnp.exe" in text  # not silently deleted
    body = next(f.text for f in failures if "MTP002" in f.text or "bf16" in (f.get("message") or ""))
    assert not [ln for ln in body.splitlines() if ln.startswith("fix:") and "rm -rf" in ln]
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["input.path"] == "/models/\\x1b[2Jckpt"


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_json_formats_parse_and_have_no_raw_control(evil_result, fmt):
    out = render(evil_result, fmt, {})
    assert not RAW.search(out), ascii(out)
    out.encode("utf-8")
    doc = json.loads(out)
    if fmt == "json":  # machine-readable: the names are exact
        assert doc["findings"][0]["location"]["tensor"] == f"{EVIL}.weight"
        assert doc["inputs"]["gpu"] == EVIL
    else:  # what a viewer displays is escaped, the data in properties is exact
        res = doc["runs"][0]["results"][0]
        assert res["message"]["text"].startswith("mtp\\x1b[2J")
        assert not RAW.search(json.dumps(res["message"], ensure_ascii=False))
        assert res["properties"]["evidence"]["tensors"][0] == EVIL
        related = [r["message"]["text"] for r in doc["runs"][0]["results"][1].get("relatedLocations", [])]
        assert related and not any(RAW.search(t) for t in related)
