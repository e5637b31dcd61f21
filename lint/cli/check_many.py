"""`mtplint check A B hf://org/x ...`: lint every PATH as `mtplint check PATH` would (its own
settings, probe, suppressions), then write one report per --format (lint/reporters/report_set.py).

A PATH that fails (bad input, probe failure) prints its usual one line and is named in the
report; the others are still linted. The exit code is the worst over the PATHs (3 > 2 > 1 > 0);
Ctrl-C or a terminating signal stops at once with its own code, before any report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

import click

from ..config.schema import Settings
from ..config.settings import Options
from ..core.errors import EXIT_BAD_INPUT, BadInput
from ..core.exit_guard import guarded
from ..core.textsafe import terminal_safe
from ..reporters.report_set import Checked, Entry, NotLinted, worst_exit

_STOP = 128  # an exit code from here up is an interrupt or a terminating signal


class _Stderr:
    """Lines for stderr, each distinct one printed once (a usage error shared by every PATH is
    one line, not one per PATH), all kept so that a failed PATH's report entry can quote its line."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        if line not in self.lines:
            click.echo(line, err=True)
        self.lines.append(line)

    def first_since(self, mark: int) -> str:
        return next(iter(self.lines[mark:]), "mtplint: error")


def run_check_many(given: list[str], opts: Options) -> int:
    debug = bool(opts.get("debug"))
    say = _Stderr()
    rc = guarded(lambda: _refuse_one_path_options(opts), debug, say)
    if rc:
        return rc
    # Every PATH's settings before any probe: a usage error is exit 2 before 10-40 s of probing.
    settings: list[Settings | None] = []
    entries: list[Entry | None] = []
    for path in given:
        rc, failed = _attempt(partial(_settings, path, opts, say, settings), path, debug, say)
        if rc >= _STOP:
            return rc
        entries.append(failed)
        if failed is not None:
            settings.append(None)
    codes = [e.exit_code for e in entries if isinstance(e, NotLinted)]
    for i, path in enumerate(given):
        if entries[i] is not None:
            continue
        linted: list[Checked] = []
        s = settings[i]
        assert s is not None  # a PATH without settings has its entry already
        rc, failed = _attempt(partial(_lint_one, path, s, linted), path, debug, say)
        if rc >= _STOP:
            return rc
        entries[i] = linted[0] if linted else failed
        codes.append(rc)
    done = [e for e in entries if e is not None]
    worst = worst_exit(codes)
    first = next((s for e, s in zip(entries, settings, strict=True) if isinstance(e, Checked)), None)
    if first is None:
        return worst  # nothing linted: no report, as for one PATH that fails
    return worst_exit([worst, guarded(lambda: _report_set(done, first), debug)])


def _attempt(step: Callable[[], int], path: str, debug: bool, say: _Stderr) -> tuple[int, NotLinted | None]:
    """One PATH's step under the exit guard: its exit code, and its report entry when it failed."""
    mark = len(say.lines)
    rc = guarded(step, debug, say)
    return rc, (NotLinted(path, rc, say.first_since(mark)) if EXIT_BAD_INPUT <= rc < _STOP else None)


def _settings(path: str, opts: Options, say: _Stderr, out: list[Settings | None]) -> int:
    from ..config.settings import sources_line
    from ..pipeline.entry import usable_settings

    s = usable_settings(Path(path), opts, announce=False)
    line = sources_line(s.lint)
    if line and not s.output.quiet:
        say(line)
    out.append(s)
    return 0


def _refuse_one_path_options(opts: Options) -> int:
    for option, key in (("--baseline", "baseline"), ("--write-baseline", "write_baseline")):
        if opts.get(key):
            raise BadInput(
                f"{option} takes one PATH: a baseline records one checkpoint's findings by id; "
                "lint each checkpoint with its own baseline"
            )
    return 0


def _lint_one(path: str, s: Settings, out: list[Checked]) -> int:
    from ..core.progress import progress_reporter
    from ..pipeline.entry import exit_code, lint_with_policy
    from .output import checked_report

    if not s.output.quiet:
        click.echo(terminal_safe(f"mtplint: {path}"), err=True)
    linted, result, notes = lint_with_policy(Path(path), s, progress=progress_reporter(s.output.quiet))
    for line in notes:
        click.echo(line, err=True)
    out.append(checked_report(path, s, linted, result))
    return exit_code(result, s.lint.fail_on)


def _report_set(entries: list[Entry], s: Settings) -> int:
    """Every --format to its --output (stdout by default), and the GitHub job summary. The
    output options are the command line's and the project file's: the same for every PATH."""
    from ..engine.loader import load_rules
    from ..reporters.github import append_step_summary
    from ..reporters.report_set import render_set, step_summary_set
    from .output import emit, output_targets

    rules = load_rules()
    full = s.output.full
    for fmt, out, color in output_targets(s):
        text = render_set(entries, fmt, rules, color=color, full=full, statistics=bool(s.output.statistics))
        emit(text, out, color)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        append_step_summary(step_summary_set(entries, rules))
    return 0
