"""`mtplint verify` prints the engine's messages, which quote names read from the checkpoint
(a tensor name in a KeyError, a config value): no raw control character reaches the terminal
or the JSON, as for every other reporter (core/textsafe.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from mtplint.verify import run as verify_run
from mtplint.verify.command import verify_cmd

HOSTILE = "start-up error: KeyError 'mtp.\x1b]52;c;ZXZpbA==\x07\x1b[2J\u202eweight'"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_engine_messages_reach_the_terminal_escaped(tmp_path, monkeypatch, fmt):
    def verified(path, **_):
        v = verify_run.Verified(path=str(path), lint={}, lint_text="", lint_verdict="clean", lint_raised=None, n=1)
        v.not_run = HOSTILE
        return v

    monkeypatch.setattr(verify_run, "verify", verified)
    (tmp_path / "config.json").write_text("{}")
    got = CliRunner().invoke(verify_cmd, [str(tmp_path), "--format", fmt])
    assert got.exit_code == 0, got.output
    assert "\x1b" not in got.output and "\x07" not in got.output and "\u202e" not in got.output
    assert "\\x1b" in got.output or "\\u001b" in got.output
    if fmt == "json":
        assert json.loads(got.output)["engine"]["not_run"] == HOSTILE  # the same data, escaped
