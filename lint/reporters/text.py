"""Human-readable report: errors, then warnings, then info; consequences nested under their cause."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from mtplint.findings import SEVERITIES, Finding, RunResult
from mtplint.reporters import checkpoint_name, consequence_tree, fix_commands, location_text, summary_line
from mtplint.textsafe import terminal_safe

if TYPE_CHECKING:
    from mtplint.engine.rule import Rule

_RESET = "\x1b[0m"
_STYLE = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "info": "\x1b[1;36m", "code": "\x1b[1m", "dim": "\x1b[2m"}
_HEADINGS = {"error": "Errors", "warning": "Warnings", "info": "Info"}

# Evidence can hold whole tracebacks and tensor lists; the text report shows highlights and
# leaves the full record to --format json.
_MAX_VALUE = 160
_MAX_ITEMS = 4
_MAX_KEYS = 8


def render_text(result: RunResult, rules: dict[str, Rule] | None = None, *, color: bool = False) -> str:
    paint = _painter(color)
    path = checkpoint_name(result)
    roots, children = consequence_tree(result.findings)
    lines: list[str] = []
    # An unexpected severity still gets printed (last), never dropped.
    extra = sorted({f.severity for f in roots} - set(SEVERITIES))
    for sev in (*SEVERITIES, *extra):
        group = [f for f in roots if f.severity == sev]
        if not group:
            continue
        lines.append(paint(sev, terminal_safe(f"{_HEADINGS.get(sev, sev.capitalize())} ({len(group)})")))
        for f, alike in _collapse_alike(group, children):
            _finding(lines, f, children, path, paint, depth=1, parent=None)
            if alike:
                shown = ", ".join(terminal_safe(location_text(a)) for a in alike[:3])
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
    lines.append(terminal_safe(summary_line(result)))
    return "\n".join(lines) + "\n"


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


def _finding(lines, f: Finding, children, path, paint, depth: int, parent: Finding | None) -> None:
    pad = "  " * depth
    body = pad + ("   " if parent is not None else "") + "    "
    # Every name, message and value below can carry text from the checkpoint. A newline in a message
    # is escaped too: rule messages are one line, so a raw one could only forge an extra line.
    message = terminal_safe(f.message.strip())
    head = (
        f"{paint('code', terminal_safe(f.code))} {terminal_safe(f.name)}  {terminal_safe(location_text(f))}  {message}"
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
    # A consequence usually shares its cause's fixes; repeating them would bury the tree.
    if parent is None or (f.fixes.patches, f.fixes.artifact) != (parent.fixes.patches, parent.fixes.artifact):
        for cmd in fix_commands(f, path):
            lines.append(body + f"fix: {terminal_safe(cmd)}")
    for child in children.get(f.id, []):
        _finding(lines, child, children, path, paint, depth + 2, parent=f)


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


def _painter(color: bool):
    if not color:
        return lambda style, text: text
    return lambda style, text: f"{_STYLE.get(style, _STYLE['code'])}{text}{_RESET}"
