"""Evaluate the rules: inventory + probe report -> findings."""

from __future__ import annotations

import string
from typing import Any

from ..checks import load_all
from ..errors import MtplintError
from ..findings import Finding, Fixes
from ..fixer import registry as fixes_registry
from ..inventory.model import Inventory
from ..patches import registry as patches_registry
from .context import Context
from .loader import load_rules
from .rule import Rule

# Specific rules first: they mark the load errors they explain, and register the root
# causes that later rules link their consequences to.
ORDER = (
    "MTP001",
    "MTP011",
    "MTP009",
    "MTP012",
    "MTP014",
    "MTP002",
    "MTP003",
    "MTP006",
    "MTP013",
    "MTP004",
    "MTP005",
    "MTP010",
    "MTP007",
    "MTP008",
)


class _Lenient(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def format_message(rule: Rule, fields: dict[str, Any]) -> str:
    return string.Formatter().vformat(rule.message, (), _Lenient(fields))


def selected(rules: dict[str, Rule], select: list[str] | None, ignore: list[str] | None) -> list[Rule]:
    def hit(code: str, pats: list[str]) -> bool:
        return any(code.startswith(p.upper()) for p in pats)

    out = [r for r in rules.values() if (not select or hit(r.code, select)) and not (ignore and hit(r.code, ignore))]
    order = {c: i for i, c in enumerate(ORDER)}
    return sorted(out, key=lambda r: (order.get(r.code, len(order)), r.code))


def evaluate(
    inventory: Inventory,
    report: dict[str, Any],
    inputs: dict[str, Any],
    *,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
) -> tuple[list[Finding], list[Rule]]:
    rules = load_rules()
    checks = load_all()
    ctx = Context(inventory, report, inputs)
    findings: list[Finding] = []
    evaluated = selected(rules, select, ignore)
    for rule in evaluated:
        fn = checks.get(rule.check)
        if fn is None:
            raise MtplintError(
                f"rule {rule.code} names check {rule.check!r}, which does not exist", path=rule.source_file
            )
        for hit in fn(ctx, rule.options):
            findings.append(
                Finding(
                    code=rule.code,
                    name=rule.name,
                    severity=hit.severity or rule.severity,
                    message=format_message(rule, hit.fields),
                    location=hit.location,
                    # Only fixes this mtplint actually ships are recommended.
                    evidence=hit.evidence,
                    fixes=Fixes(
                        patches=patches_registry.recommendable(
                            rule.fixes.get("patches", []), ctx.vllm_version, *_subject(hit)
                        ),
                        artifact=fixes_registry.known(_artifact_fixes(rule, hit)),
                    ),
                    caused_by=hit.caused_by,
                    key=hit.key,
                    basis=hit.basis,
                )
            )
    ids = {f.id for f in findings}
    for f in findings:
        if f.caused_by not in ids:
            f.caused_by = None  # the cause's rule was deselected or stayed silent
    _downgrade_causes_without_consequences(findings, {r.code: r for r in evaluated})
    return findings, evaluated


def _artifact_fixes(rule: Rule, hit: Any) -> list[str]:
    """The rule's artifact fixes, narrowed to those the hit says apply to it."""
    listed = rule.fixes.get("artifact", [])
    return listed if hit.artifact_fixes is None else [f for f in listed if f in hit.artifact_fixes]


def _subject(hit: Any) -> tuple[str | None, str | None]:
    """The model and runtime path a hit is about, for scoping its runtime patches."""
    model = hit.evidence.get("model") or hit.fields.get("model")
    path = next((hit.fields[k] for k in ("module", "param") if hit.fields.get(k) is not None), None)
    return model, path


def _downgrade_causes_without_consequences(findings: list[Finding], rules: dict[str, Rule]) -> None:
    """A rule may say its errors only matter through what they cause (a dead ignore entry
    is harmless once a runtime patch builds the draft right): without any consequence in
    this run, such a finding drops to the severity the rule names."""
    causes = {f.caused_by for f in findings if f.caused_by}
    for f in findings:
        lower = rules[f.code].options.get("without_consequences")
        if lower and f.severity == "error" and f.id not in causes:
            f.severity = lower
            f.evidence["severity_note"] = "no consequence in this configuration"
