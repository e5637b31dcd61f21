"""Reporters: one RunResult rendered as text, JSON, JUnit XML, SARIF or GitHub workflow commands.

The format modules are imported lazily in render() so that this package stays importable (and
cheap) whichever formats a run uses; what they share is in common.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.findings import RunResult

if TYPE_CHECKING:
    from ..engine.rule import Rule
    from .modules import ModuleRow

FORMATS = ("text", "json", "junit", "sarif", "github")


def render(
    result: RunResult,
    fmt: str,
    rules: dict[str, Rule],
    *,
    color: bool = False,
    fail_on: str = "error",
    uri_prefix: str = "",
    full: bool = False,
    statistics: bool = False,
    modules: list[ModuleRow] | None = None,
) -> str:
    """Render `result` in `fmt`.

    color, full (the evidence tree instead of one line per root cause), statistics (counts
    per rule instead of the findings): text only. modules: the draft's module table, in the
    full text report. fail_on: junit only (lowest severity that becomes a <failure>).
    uri_prefix: sarif and github; the checkpoint root's path relative to the scanned repository,
    so that annotations land on the repository's files.
    """
    if fmt == "text":
        from .text import render_text

        return render_text(result, rules, color=color, full=full, statistics=statistics, modules=modules)
    if fmt == "json":
        from .json_report import render_json

        return render_json(result, rules)
    if fmt == "junit":
        from .junit import render_junit

        return render_junit(result, rules, fail_on=fail_on)
    if fmt == "sarif":
        from .sarif import render_sarif

        return render_sarif(result, rules, uri_prefix=uri_prefix)
    if fmt == "github":
        from .github import render_github

        return render_github(result, rules, uri_prefix=uri_prefix)
    raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")


# ---- shared helpers -------------------------------------------------------------------------
