"""The probe's live phases (issue 15): the child appends them, the parent relays what is new,
and a CI log gets plain timed lines while -q and pipes get none."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from mtplint.cli_options import progress_reporter
from mtplint.probe import phases

from fixtures.build import cached_build


def test_reader_returns_each_whole_line_once_and_waits_for_a_partial_one(tmp_path, monkeypatch):
    path = tmp_path / "phases.jsonl"
    monkeypatch.setenv(phases.ENV, str(path))
    reader = phases.Reader(path)
    assert reader.new() == []  # not written yet
    phases.emit("importing vLLM")
    phases.emit("constructing the target")
    assert reader.new() == ["importing vLLM", "constructing the target"]
    assert reader.new() == []
    with open(path, "a") as f:
        f.write(json.dumps({"phase": "dry-run", "t": 1.0})[:10])  # the child is mid-write
    assert reader.new() == []
    with open(path, "a") as f:
        f.write(json.dumps({"phase": "dry-run", "t": 1.0})[10:] + "\n" + "not json\n")
    assert reader.new() == ["dry-run"]


def test_emit_outside_a_probe_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(phases.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    phases.emit("anything")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("ci", "quiet", "lines"), [("true", False, True), ("", False, False), ("true", True, False)])
def test_progress_goes_to_ci_logs_but_not_to_pipes_or_quiet_runs(monkeypatch, capsys, ci, quiet, lines):
    monkeypatch.setenv("CI", ci)
    say = progress_reporter(quiet)
    assert (say is not None) == lines
    if say:
        say("probe: importing vLLM")
        assert capsys.readouterr().err.strip().endswith("s] probe: importing vLLM")


@pytest.mark.probe
def test_a_ci_log_shows_each_probe_phase_with_its_time(tmp_path):
    checkpoint = cached_build("qwen35-bf16-official")
    env = {**os.environ, "CI": "true", "MTPLINT_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "mtplint", str(checkpoint), "--no-cache"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    said = [ln.split("] ", 1)[1] for ln in out.stderr.splitlines() if ln.startswith("[")]
    probe = [s for s in said if s.startswith("probe: ")]
    assert said[0].startswith("reading safetensors headers") or said[0].startswith("inventory: ")
    for expected in ("importing vLLM", "constructing", "dry-run load of the target", "dry-run load of the MTP draft"):
        assert any(expected in s for s in probe), (expected, said)
    assert len(probe) >= 5
