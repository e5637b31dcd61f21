"""The probe's live phases (issue 15): the child appends them, the parent relays what is new,
and a CI log gets plain timed lines while -q and pipes get none."""

from __future__ import annotations

import io
import json
import os
import pty
import shutil
import subprocess
import sys

import pytest
from mtplint.core.progress import Progress, progress_reporter, settle
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
    # A cold probe, which imports vLLM itself (a warm worker's lines: tests/probe/test_probe_worker.py).
    env = {**os.environ, "CI": "true", "MTPLINT_CACHE_DIR": str(tmp_path), "MTPLINT_WORKER_IDLE": "0"}
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


class _Screen(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_live_line_that_is_erased_before_anything_else(monkeypatch):
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((40, 24)))
    screen = _Screen()
    say = Progress(screen, live=True)
    say("probe: importing vLLM")
    say("probe: constructing the target " + "x" * 80)
    say.tick()
    settle()
    out = screen.getvalue()
    assert "\n" not in out  # every message replaces the last in place
    frames = out.split("\r\x1b[K")
    assert frames[-1] == ""  # settled: the line is erased, the report starts on a clean line
    assert frames[1].endswith("probe: importing vLLM")
    assert all(len(f) <= 39 for f in frames)  # cut to the terminal's width: a wrapped line cannot be erased
    assert frames[2].endswith("…") and frames[3].endswith("…")  # tick re-renders the current message
    settle()
    assert screen.getvalue() == out  # nothing left to erase


@pytest.mark.parametrize(("term", "ci", "live"), [("xterm", "", True), ("dumb", "", False), ("xterm", "true", False)])
def test_a_terminal_is_live_unless_it_cannot_erase_or_is_a_ci_log(monkeypatch, term, ci, live):
    monkeypatch.setenv("TERM", term)
    monkeypatch.setenv("CI", ci)
    monkeypatch.setattr(sys, "stderr", _Screen())
    say = progress_reporter(quiet=False)
    assert say is not None and say.live is live
    assert progress_reporter(quiet=True) is None


@pytest.mark.probe
def test_a_terminal_sees_the_probe_phases_on_one_line_and_a_clean_report(tmp_path):
    """Through a pseudo-terminal: the real command, the real probe."""
    checkpoint = cached_build("qwen35-bf16-official")
    env = {**os.environ, "TERM": "xterm", "MTPLINT_CACHE_DIR": str(tmp_path), "COLUMNS": "200"}
    env["MTPLINT_WORKER_IDLE"] = "0"  # a cold probe: every phase, importing vLLM included
    env.pop("CI", None)
    main, child_side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtplint", str(checkpoint), "--no-cache"],
        stdout=subprocess.PIPE,
        stderr=child_side,
        env=env,
    )
    os.close(child_side)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the command closed its end
            break
        if not chunk:
            break
        seen += chunk
    report = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.wait() == 0, seen[-2000:]
    os.close(main)
    screen = seen.decode()
    frames = screen.split("\r\x1b[K")
    probe = [f for f in frames if "] probe: " in f]
    assert any("importing vLLM" in f for f in probe) and any("dry-run load of the MTP draft" in f for f in probe)
    assert all("\n" not in f for f in frames[1:])  # every progress message replaced the last in place
    assert frames[-1] == ""  # erased before the report
    assert "no findings" in report and "\x1b[K" not in report
