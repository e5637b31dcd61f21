"""Where a report goes: each --format to its --output or stdout, coloured or not, with what it is
rendered with besides the result (the draft's module table, the repository-relative path)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ..config.schema import Settings
from ..reporters.report_set import Checked


def checked_report(given: str, s: Settings, linted: Any, result: Any) -> Checked:
    """What a checkpoint's report is rendered with besides its result: the draft's module table
    (full text, job summary) and its path relative to the repository root (sarif, github)."""
    from ..reporters.lines import repo_prefix
    from ..reporters.modules import rows
    from ..reporters.report_set import Checked

    formats = set(s.output.formats or ["text"])
    full = s.output.full
    summary = bool(os.environ.get("GITHUB_STEP_SUMMARY"))
    modules = rows(linted.draft_modules(), result.findings) if full or summary else None
    # A hub repository's inputs path is hf://ORG/NAME@COMMIT: its files are named from there, not a repo root.
    # With --draft the files named are the draft's: its repository root, not the target's.
    where = linted.origin or s.lint.draft or given
    uri_prefix = repo_prefix(where, s.output.repo_root) if {"sarif", "github"} & formats else ""
    return Checked(given, result, uri_prefix, modules, s.lint.fail_on)


def output_targets(s: Settings) -> list[tuple[str, Path | None, bool]]:
    """(format, file or None for stdout, colour) per --format."""
    from ..reporters.color import use_color

    outputs = list(s.output.outputs)
    targets = []
    for i, fmt in enumerate(s.output.formats or ["text"]):
        out = outputs[i] if outputs else None
        to_stdout = out is None or str(out) == "-"
        color = fmt == "text" and to_stdout and use_color(s.output.color or "auto", sys.stdout)
        targets.append((fmt, None if to_stdout else out, color))
    return targets


def emit(text: str, out: Path | None, color: bool) -> None:
    if out is None:
        # color= says it was decided: click would strip the styles when not on a terminal.
        click.echo(text, nl=not text.endswith("\n"), color=color)
    else:
        out.write_text(text)
