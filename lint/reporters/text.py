"""Human-readable report.

Default (concise): one line per root cause, `path:line: CODE name: message (+N consequences)`,
its fix commands, then one summary line. `full`: every finding with its evidence, consequences
nested under their cause, and the draft's module table. `statistics`: counts per rule.

Paths are relative to the working directory (absolute outside it); a line number is given
where the finding points into a JSON file (the line of the exact entry), never for a shard.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..core.findings import SEVERITIES, SEVERITY_RANK, Finding, RunResult
from ..core.textsafe import terminal_safe
from .color import Painter, painter
from .common import checkpoint_name, consequence_tree, fix_commands, plural, summary_line
from .lines import SourceLines, display_path
from .modules import ModuleRow, table_lines

if TYPE_CHECKING:
    from ..engine.rule import Rule

_HEADINGS = {"error": "Errors", "warning": "Warnings", "info": "Info"}

# Evidence can hold whole tracebacks and tensor lists; the text report shows highlights and
# leaves the full record to --format json.
_MAX_VALUE = 160
_MAX_ITEMS = 4
_MAX_KEYS = 8
_MAX_FIXES = 3  # fix commands under one root cause in the concise report


def render_text(
    result: RunResult,
    rules: dict[str, Rule] | None = None,
    *,
    color: bool = False,
    full: bool = False,
    statistics: bool = False,
    modules: list[ModuleRow] | None = None,
) -> str:
    paint = painter(color)
    view = _View(result, paint)
    if statistics:
        lines = _statistics(result)
    elif full:
        lines = _full(view, modules)
    else:
        lines = _concise(view)
    if lines:
        lines.append("")
    lines.append(terminal_safe(summary_line(result)))
    return "\n".join(lines) + "\n"


class _View:
    """What every layout shares: the tree, where each finding is, the painter."""

    def __init__(self, result: RunResult, paint: Painter):
        self.result = result
        self.paint = paint
        self.root = checkpoint_name(result)
        self.roots, self.children = consequence_tree(result.findings)
        self.lines = SourceLines(result.inputs.path)

    def where(self, f: Finding) -> str:
        """`path:line` or `path`, the path as the reader's shell sees it."""
        file, line = self.lines.locate(f)
        path = display_path(self.root, file)
        return f"{path}:{line}" if line is not None else path

    def descendants(self, f: Finding) -> int:
        seen: set[str] = set()
        stack = list(self.children.get(f.id, []))
        while stack:
            c = stack.pop()
            if c.id not in seen:
                seen.add(c.id)
                stack.extend(self.children.get(c.id, []))
        return len(seen)

    def by_severity(self) -> list[tuple[str, list[Finding]]]:
        # An unexpected severity still gets printed (last), never dropped.
        extra = sorted({f.severity for f in self.roots} - set(SEVERITIES))
        groups = [(sev, [f for f in self.roots if f.severity == sev]) for sev in (*SEVERITIES, *extra)]
        return [(sev, group) for sev, group in groups if group]


def _concise(view: _View) -> list[str]:
    paint, lines = view.paint, []
    hidden = 0
    for _sev, group in view.by_severity():
        for f, alike in _collapse_alike(group, view.children):
            n = view.descendants(f)
            hidden += n
            suffix = f" (+{plural(n, 'consequence')})" if n else ""
            if alike:
                suffix += f" (+{len(alike)} more like it, differing only in numbers)"
            lines.append(
                f"{paint('path', terminal_safe(view.where(f)))}: "
                f"{paint(f.severity, terminal_safe(f.code))} {terminal_safe(f.name)}: "
                f"{terminal_safe(f.message.strip())}{paint('dim', suffix)}"
            )
            for cmd in list(dict.fromkeys(fix_commands(f, view.root)))[:_MAX_FIXES]:
                lines.append(f"  fix: {terminal_safe(cmd)}")
    if hidden:
        lines.append(paint("dim", f"(-v or --output-format full: the {plural(hidden, 'consequence')} and evidence)"))
    return lines


def _statistics(result: RunResult) -> list[str]:
    """Counts per rule, most frequent first, like `ruff --statistics`."""
    roots, _ = consequence_tree(result.findings)
    root_ids = {f.id for f in roots}
    counts = Counter(f.code for f in result.findings)
    causes = Counter(f.code for f in result.findings if f.id in root_ids)
    names = {f.code: f.name for f in result.findings}
    worst: dict[str, str] = {}
    for f in result.findings:
        if SEVERITY_RANK.get(f.severity, -1) >= SEVERITY_RANK.get(worst.get(f.code, ""), -1):
            worst[f.code] = f.severity
    width = len(str(max(counts.values(), default=0)))
    name_width = max((len(n) for n in names.values()), default=0)
    lines = []
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        split = [plural(k, w) for k, w in ((causes[code], "root cause"), (n - causes[code], "consequence")) if k]
        row = f"{n:>{width}}  {code}  {worst[code]:<7}  {names[code]:<{name_width}}  ({', '.join(split)})"
        lines.append(terminal_safe(row))
    return lines


def _full(view: _View, modules: list[ModuleRow] | None) -> list[str]:
    paint, lines = view.paint, []
    for sev, group in view.by_severity():
        consequences = sum(view.descendants(f) for f in group)
        heading = f"{_HEADINGS.get(sev, sev.capitalize())} ({plural(len(group), 'root cause')}"
        heading += f", +{plural(consequences, 'consequence')})" if consequences else ")"
        lines.append(paint(sev, terminal_safe(heading)))
        for f, alike in _collapse_alike(group, view.children):
            _finding(lines, f, view, depth=1, parent=None, shown=set())
            if alike:
                shown = ", ".join(terminal_safe(_location_detail(a, view)) for a in alike[:3])
                lines.append(
                    "      "
                    + paint(
                        "dim",
                        f"(+{len(alike)} more like it, differing only in numbers: "
                        f"{shown}{', ...' if len(alike) > 3 else ''}; "
                        "each is in --format json)",
                    )
                )
        lines.append("")
    if modules:
        lines.append(paint("code", "Draft modules"))
        lines += ["  " + terminal_safe(row) for row in table_lines(modules)]
        lines.append("")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


_NUMBERS = re.compile(r"\d+")
_COLLAPSE_FROM = 3  # this many findings alike (one per layer, typically) print as one


def _collapse_alike(group: list[Finding], children) -> list[tuple[Finding, list[Finding]]]:
    """Findings of one rule whose messages differ only in numbers (the same failure in every
    decoder layer) print once, with a count; findings with consequences always print."""
    by_shape: dict[tuple[str, str], list[Finding]] = {}
    for f in group:
        if not children.get(f.id):
            by_shape.setdefault((f.code, _NUMBERS.sub("N", f.message)), []).append(f)
    out = []
    for f in group:
        alike = [] if children.get(f.id) else by_shape[(f.code, _NUMBERS.sub("N", f.message))]
        if len(alike) >= _COLLAPSE_FROM:
            if alike[0] is f:
                out.append((f, alike[1:]))
        else:
            out.append((f, []))
    return out


def _location_detail(f: Finding, view: _View) -> str:
    loc = f.location
    where = view.where(f)
    detail = loc.tensor or loc.config_key
    return f"{where} ({detail})" if detail else where


def _finding(lines, f: Finding, view: _View, depth: int, parent: Finding | None, shown: set[str]) -> None:
    paint = view.paint
    pad = "  " * depth
    body = pad + ("   " if parent is not None else "") + "    "
    # Every name, message and value below can carry text from the checkpoint. A newline in a message
    # is escaped too: rule messages are one line, so a raw one could only forge an extra line.
    message = terminal_safe(f.message.strip())
    head = (
        f"{paint('code', terminal_safe(f.code))} {terminal_safe(f.name)}  "
        f"{terminal_safe(_location_detail(f, view))}  {message}"
    )
    if parent is not None:
        head = f"-> {paint(f.severity, terminal_safe(f.severity))} {head}"
    lines.append(pad + head)
    for key, value in list(f.evidence.items())[:_MAX_KEYS]:
        lines.append(body + paint("dim", terminal_safe(f"{key}: {_highlight(value)}")))
    if len(f.evidence) > _MAX_KEYS:
        lines.append(body + paint("dim", f"(+{len(f.evidence) - _MAX_KEYS} more evidence fields in --format json)"))
    if f.basis != "probe":
        lines.append(
            body + paint("dim", f"basis: {terminal_safe(f.basis)} (the vLLM probe did not observe this directly)")
        )
    # Consequences usually share their cause's fixes, and siblings each other's: a command is
    # printed once per tree, where it first applies; repeating it would bury the tree.
    for cmd in fix_commands(f, view.root):
        if cmd not in shown:
            shown.add(cmd)
            lines.append(body + f"fix: {terminal_safe(cmd)}")
    for child in view.children.get(f.id, []):
        _finding(lines, child, view, depth + 2, parent=f, shown=shown)


def _highlight(value: Any) -> str:
    if isinstance(value, str):
        text_lines = [ln for ln in value.splitlines() if ln.strip()]
        # Tracebacks end with the exception line, which is the part worth seeing.
        text = text_lines[-1].strip() if text_lines else ""
        if len(text_lines) > 1:
            text += f"  (last of {len(text_lines)} lines)"
    elif isinstance(value, (list, tuple, set)):
        items = sorted(value, key=str) if isinstance(value, set) else list(value)
        text = ", ".join(str(v) for v in items[:_MAX_ITEMS])
        if len(items) > _MAX_ITEMS:
            text += f", ... (+{len(items) - _MAX_ITEMS} more)"
    elif isinstance(value, dict):
        text = json.dumps(value, default=str, separators=(", ", ": "))
    else:
        text = str(value)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 3] + "..."
