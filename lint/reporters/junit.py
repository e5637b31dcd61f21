"""JUnit XML: one testcase per evaluated rule, so CI keeps a pass/fail history per rule.

Names are unique per classname because GitLab keeps only the first of duplicate (classname, name)
pairs. See linter-conventions.md 2.3/2.4 for the junit-xml quirks worked around here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from junit_xml import TestCase, TestSuite, to_xml_report_string

from ..core.findings import SEVERITY_RANK, Finding, RunResult
from ..core.textsafe import json_safe, terminal_safe, terminal_safe_lines
from ..core.versions import __version__
from .common import at_least, checkpoint_name, fix_commands, jsonable, location_text, summary_line

if TYPE_CHECKING:
    from ..engine.rule import Rule


def render_junit(result: RunResult, rules: dict[str, Rule] | None = None, *, fail_on: str = "error") -> str:
    return to_xml_report_string([build_suite(result, fail_on=fail_on)], encoding="utf-8")


def build_suite(result: RunResult, *, fail_on: str = "error", label: str | None = None) -> TestSuite:
    """One checkpoint's testsuite. label: several checkpoints in one report (`mtplint check A B`)
    name the suite by it and add it to each testcase name, so that (classname, name) stays
    unique across the suites."""
    if fail_on not in SEVERITY_RANK:
        raise ValueError(f"fail_on must be one of {', '.join(SEVERITY_RANK)}, not {fail_on!r}")
    path = checkpoint_name(result)
    cases = [
        _case(code, name, [f for f in result.findings if f.code == code], path, fail_on, label)
        for code, name in _rule_list(result)
    ]
    props = {
        "mtplint.version": __version__,
        "vllm.version": result.vllm.version,
        "vllm.commit": result.vllm.commit,
        **{f"input.{k}": v for k, v in result.inputs.to_json().items()},
    }
    return TestSuite(
        name=terminal_safe(path if label is None else label),
        test_cases=cases,
        properties={terminal_safe(k): terminal_safe(_prop(v)) for k, v in props.items() if v is not None},
        stdout=terminal_safe(summary_line(result)),
    )


def _rule_list(result: RunResult) -> list[tuple[str, str]]:
    # A finding whose rule is missing from rules_evaluated still gets a testcase: never drop a failure.
    listed = [(r["code"], r.get("name", "")) for r in result.rules_evaluated]
    known = {code for code, _ in listed}
    for f in result.findings:
        if f.code not in known:
            listed.append((f.code, f.name))
            known.add(f.code)
    return listed


def _case(code: str, name: str, findings: list[Finding], path: str, fail_on: str, label: str | None) -> TestCase:
    failing = [f for f in findings if at_least(f.severity, fail_on)]
    body = "\n\n".join(_describe(f, path) for f in findings) or None
    case = TestCase(
        name=terminal_safe(f"{code} {name}".strip() + (f" [{label}]" if label is not None else "")),
        classname=terminal_safe(f"mtplint.{code}"),
        file=terminal_safe(findings[0].location.file) if findings else None,
        stdout=None if failing else body,
    )
    if failing:
        worst = max(failing, key=lambda f: SEVERITY_RANK.get(f.severity, 0))
        first_line = failing[0].message.strip() or f"{code} {name}"
        if len(findings) > 1:
            first_line += f" (+{len(findings) - 1} more)"
        # The message must be non-empty, or junit-xml silently records a pass.
        case.add_failure_info(
            message=terminal_safe(first_line), output=body, failure_type=terminal_safe(worst.severity)
        )
    return case


def _describe(f: Finding, path: str) -> str:
    # XML 1.0 cannot hold C0 controls even as character references (junit-xml would silently
    # delete them), so checkpoint text is escaped visibly. Only evidence keeps its line breaks
    # (tracebacks), indented so that no line of it can pass for a "fix:" line.
    lines = [terminal_safe(f"[{f.severity}] {location_text(f)}"), terminal_safe(f.message.strip())]
    for k, v in f.evidence.items():
        value = (
            terminal_safe_lines(v).replace("\n", "\n    ")
            if isinstance(v, str)
            else json_safe(json.dumps(v, default=jsonable))
        )
        lines.append(f"  {terminal_safe(k)}: {value}")
    if f.caused_by:
        lines.append(f"caused by: {terminal_safe(f.caused_by)}")
    lines += [f"fix: {terminal_safe(cmd)}" for cmd in fix_commands(f, path)]
    return "\n".join(lines)


def _prop(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)
