"""GitHub Actions: workflow-command annotations and a Markdown job summary."""

from __future__ import annotations

import os
import posixpath
import re
from typing import TYPE_CHECKING

from ..core.findings import SEVERITIES, SEVERITY_RANK, Finding, RunResult
from ..core.textsafe import terminal_safe
from .common import checkpoint_name, consequence_tree, fix_commands, location_text, summary_line
from .lines import SourceLines

if TYPE_CHECKING:
    from ..engine.rule import Rule
    from .modules import ModuleRow

_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}
# GitHub drops annotations past 10 errors and 10 warnings per step, silently.
ANNOTATION_LIMIT = 10


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


# The runner's log viewer interprets ANSI sequences, and a raw newline would end the workflow
# command (letting the rest of a name issue commands of its own): each piece of checkpoint text
# is made one safe line first, then the workflow-command escaping is applied.
def _data(text: str) -> str:
    return escape_data(terminal_safe(text))


def _property(text: str) -> str:
    return escape_property(terminal_safe(text))


def annotation(
    f: Finding,
    *,
    uri_prefix: str = "",
    path: str = "PATH",
    cause: Finding | None = None,
    lines: SourceLines | None = None,
) -> str:
    """uri_prefix: the checkpoint relative to the repository root; lines: where the
    checkpoint's JSON files are read to find the line of the entry a finding is about."""
    file, line = (lines or SourceLines(None)).locate(f)
    file = posixpath.join(uri_prefix.strip("/"), file) if uri_prefix.strip("/") else file
    title = f"{f.code} {f.name}"
    if cause is not None:
        title += f" (consequence of {cause.code})"
    body = [f.message.strip(), f"at {location_text(f)}"]
    body += [f"fix: {cmd}" for cmd in fix_commands(f, path)]
    props = f"file={_property(file)}" + (f",line={line}" if line else "") + f",title={_property(title)}"
    # %0A between the pieces is the annotation's own line break; newlines inside a piece are escaped.
    return f"::{_COMMAND.get(f.severity, 'warning')} {props}::{'%0A'.join(_data(b) for b in body)}"


def render_github(result: RunResult, rules: dict[str, Rule] | None = None, *, uri_prefix: str = "") -> str:
    path = checkpoint_name(result)
    by_id = {f.id: f for f in result.findings}
    # Most severe first, causes before their consequences, so the annotations GitHub keeps are the ones that matter.
    roots, _ = consequence_tree(result.findings)
    root_ids = {f.id for f in roots}
    ordered = sorted(result.findings, key=lambda f: (-SEVERITY_RANK.get(f.severity, 0), f.id not in root_ids))
    where = SourceLines(result.inputs.path)
    lines = [
        annotation(f, uri_prefix=uri_prefix, path=path, cause=by_id.get(f.caused_by or ""), lines=where)
        for f in ordered
    ]
    counts = {sev: sum(f.severity == sev for f in result.findings) for sev in SEVERITIES}
    if any(n > ANNOTATION_LIMIT for n in counts.values()):
        lines.append(
            f"mtplint: GitHub shows at most {ANNOTATION_LIMIT} annotations per level per step; "
            "the job summary lists every finding."
        )
    lines.append(terminal_safe(summary_line(result)))
    return "\n".join(lines) + "\n"


def step_summary(
    result: RunResult, rules: dict[str, Rule] | None = None, modules: list[ModuleRow] | None = None
) -> str:
    path = checkpoint_name(result)
    roots, children = consequence_tree(result.findings)
    out = [f"## mtplint: `{_code(path)}`", "", _cell(summary_line(result)), ""]
    if result.findings:
        out += ["| Severity | Rule | Location | Message | Fix |", "| --- | --- | --- | --- | --- |"]
        for f in _tree_order(roots, children):
            rule = f"`{_code(f.code)}` {_cell(f.name)}" + (
                f" (caused by `{_code(f.caused_by)}`)" if f.caused_by else ""
            )
            fixes = "<br>".join(f"`{_code(c)}`" for c in fix_commands(f, path)) or "-"
            out.append(
                f"| {_cell(f.severity)} | {rule} | `{_code(location_text(f))}` | {_cell(f.message.strip())} | {fixes} |"
            )
        out.append("")
    if modules:
        from .modules import HEADERS

        out += ["### Draft modules", "", "| " + " | ".join(HEADERS) + " |", "| --- | --- | --- | --- |"]
        out += ["| " + " | ".join(_cell(c) for c in row.cells()) + " |" for row in modules]
        out.append("")
    return "\n".join(out) + "\n"


def write_step_summary(
    result: RunResult, rules: dict[str, Rule] | None = None, modules: list[ModuleRow] | None = None
) -> bool:
    """Append the summary to $GITHUB_STEP_SUMMARY; False (and nothing written) when it is not set."""
    return append_step_summary(step_summary(result, rules, modules))


def append_step_summary(markdown: str) -> bool:
    """Append to $GITHUB_STEP_SUMMARY; False (and nothing written) when it is not set."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(markdown)
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


def _code(text: str) -> str:
    # Inside a code span only a pipe (ends the table cell) and a backtick (ends the span) are special;
    # a newline would end the row and is escaped with the other controls.
    return terminal_safe(text).replace("|", "\\|").replace("`", "'")


# Markdown would turn a name such as `[x](https://...)`, `<img src=...>` or `**x**` into a link, an
# image or emphasis, and eat the backslashes of a regex entry: the marks that open those are
# backslash-escaped, so the cell shows the text exactly.
_MARKDOWN = re.compile(r"([\\`*_\[\]<>|~&])")


def _cell(text: str) -> str:
    return _MARKDOWN.sub(r"\\\1", terminal_safe(text))
