"""GitHub Actions: workflow-command annotations and a Markdown job summary."""

from __future__ import annotations

import os
import posixpath
from typing import TYPE_CHECKING

from mtplint.findings import SEVERITIES, SEVERITY_RANK, Finding, RunResult
from mtplint.reporters import checkpoint_name, consequence_tree, fix_commands, location_text, summary_line

if TYPE_CHECKING:
    from mtplint.engine.rule import Rule

_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}
# GitHub drops annotations past 10 errors and 10 warnings per step, silently.
ANNOTATION_LIMIT = 10


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding, *, uri_prefix: str = "", path: str = "PATH", cause: Finding | None = None) -> str:
    file = posixpath.join(uri_prefix.strip("/"), f.location.file) if uri_prefix.strip("/") else f.location.file
    title = f"{f.code} {f.name}"
    if cause is not None:
        title += f" (consequence of {cause.code})"
    body = [f.message, f"at {location_text(f)}"]
    body += [f"fix: {cmd}" for cmd in fix_commands(f, path)]
    props = f"file={escape_property(file)},title={escape_property(title)}"
    return f"::{_COMMAND.get(f.severity, 'warning')} {props}::{escape_data(chr(10).join(body))}"


def render_github(result: RunResult, rules: dict[str, Rule] | None = None, *, uri_prefix: str = "") -> str:
    path = checkpoint_name(result)
    by_id = {f.id: f for f in result.findings}
    # Most severe first, causes before their consequences, so the annotations GitHub keeps are the ones that matter.
    roots, _ = consequence_tree(result.findings)
    root_ids = {f.id for f in roots}
    ordered = sorted(result.findings, key=lambda f: (-SEVERITY_RANK.get(f.severity, 0), f.id not in root_ids))
    lines = [annotation(f, uri_prefix=uri_prefix, path=path, cause=by_id.get(f.caused_by or "")) for f in ordered]
    counts = {sev: sum(f.severity == sev for f in result.findings) for sev in SEVERITIES}
    if any(n > ANNOTATION_LIMIT for n in counts.values()):
        lines.append(
            f"mtplint: GitHub shows at most {ANNOTATION_LIMIT} annotations per level per step; "
            "the job summary lists every finding."
        )
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"


def step_summary(result: RunResult, rules: dict[str, Rule] | None = None) -> str:
    path = checkpoint_name(result)
    roots, children = consequence_tree(result.findings)
    out = [f"## mtplint: `{_cell(path)}`", "", summary_line(result), ""]
    if result.findings:
        out += ["| Severity | Rule | Location | Message | Fix |", "| --- | --- | --- | --- | --- |"]
        for f in _tree_order(roots, children):
            rule = f"`{f.code}` {f.name}" + (f" (caused by `{_cell(f.caused_by)}`)" if f.caused_by else "")
            fixes = "<br>".join(f"`{_cell(c)}`" for c in fix_commands(f, path)) or "-"
            out.append(f"| {f.severity} | {rule} | `{_cell(location_text(f))}` | {_cell(f.message)} | {fixes} |")
        out.append("")
    return "\n".join(out) + "\n"


def write_step_summary(result: RunResult, rules: dict[str, Rule] | None = None) -> bool:
    """Append the summary to $GITHUB_STEP_SUMMARY; False (and nothing written) when it is not set."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(step_summary(result, rules))
    return True


def _tree_order(roots: list[Finding], children: dict[str, list[Finding]]) -> list[Finding]:
    ordered: list[Finding] = []

    def walk(f: Finding) -> None:
        ordered.append(f)
        for c in children.get(f.id, []):
            walk(c)

    for sev in SEVERITIES:
        for f in roots:
            if f.severity == sev:
                walk(f)
    return ordered


def _cell(text: str) -> str:
    # A pipe ends a table cell and a newline ends the row; backticks would break the code span.
    return text.replace("|", "\\|").replace("\r", "").replace("\n", "<br>").replace("`", "'")
