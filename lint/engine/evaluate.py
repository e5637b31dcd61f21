"""Evaluate the rules: inventory + probe report -> findings."""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from typing import Any

from ..checks import load_all
from ..checks.context import Context, Hit
from ..core.errors import MtplintError
from ..core.findings import Finding, Fixes
from ..core.run_inputs import RunInputs
from ..inventory.model import Inventory
from ..probe.report import ProbeReport
from .loader import load_rules
from .order import rule_order
from .rule import Rule

# (rule, hit, probed vLLM version) -> the fixes to recommend; the session passes one that
# knows which patches and artifact fixes this mtplint ships (the engine does not import them).
Recommend = Callable[[Rule, Hit, str], Fixes]


def format_message(rule: Rule, fields: dict[str, Any]) -> str:
    try:
        return string.Formatter().vformat(rule.message, (), fields)
    except (KeyError, IndexError) as exc:
        raise MtplintError(f"check {rule.check} left message field {exc} unfilled", path=rule.source_file) from None


def selected(rules: dict[str, Rule], select: list[str] | None, ignore: list[str] | None) -> list[Rule]:
    def hit(code: str, pats: list[str]) -> bool:
        return any(code.startswith(p.upper()) for p in pats)

    return [rules[c] for c in rule_order(rules) if (not select or hit(c, select)) and not (ignore and hit(c, ignore))]


def evaluate(
    inventory: Inventory,
    report: ProbeReport | Mapping[str, Any],
    inputs: RunInputs,
    *,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    recommend: Recommend | None = None,
    reference: Inventory | None = None,
    target: Inventory | None = None,
) -> tuple[list[Finding], list[Rule]]:
    """Run the selected rules' checks over one probe report (or its JSON form, validated).
    reference: the source checkpoint's inventory (--reference), for the rules that compare with it.
    target: a separate draft's target's inventory (the inventory is the draft's)."""
    rules = load_rules()
    checks = load_all()
    if not isinstance(report, ProbeReport):
        report = ProbeReport.from_json(dict(report))
    ctx = Context(inventory, report, inputs, reference=reference, target=target)
    findings: list[Finding] = []
    evaluated = selected(rules, select, ignore)
    architecture = ctx.target_architecture
    for rule in evaluated:
        if not rule.applies_to.matches(architecture, ctx.vllm_version):
            continue
        for hit in checks[rule.check].fn(ctx, rule.options):
            _check_relations(rule, hit)
            finding = Finding(
                code=rule.code,
                name=rule.name,
                severity=hit.severity or rule.severity,
                message=format_message(rule, hit.fields),
                location=hit.location,
                evidence=hit.evidence,
                fixes=recommend(rule, hit, ctx.vllm_version) if recommend else _listed_fixes(rule, hit),
                caused_by=ctx.cause_id(hit.because),
                key=hit.key,
                basis=hit.basis,
            )
            ctx.record(finding.id, hit)
            findings.append(finding)
    _downgrade_causes_without_consequences(findings, {r.code: r for r in evaluated})
    return findings, evaluated


def _listed_fixes(rule: Rule, hit: Hit) -> Fixes:
    return Fixes(patches=list(rule.fixes.get("patches", [])), artifact=artifact_fixes(rule, hit))


def artifact_fixes(rule: Rule, hit: Hit) -> list[str]:
    """The rule's artifact fixes, narrowed to those the hit says apply to it. A hit naming a fix
    its rule file does not declare is an mtplint bug, not a fix to drop silently."""
    listed = rule.fixes.get("artifact", [])
    if hit.artifact_fixes is None:
        return listed
    undeclared = sorted(set(hit.artifact_fixes) - set(listed))
    if undeclared:
        raise MtplintError(
            f"check {rule.check} names artifact fix(es) {', '.join(undeclared)} that {rule.code}'s "
            "[fixes] artifact does not declare",
            path=rule.source_file,
        )
    return [f for f in listed if f in hit.artifact_fixes]


def _check_relations(rule: Rule, hit: Hit) -> None:
    """A check may only provide, link to and claim what its rule file declares."""
    undeclared = (
        [c.label for c in hit.provides if c.label not in rule.relations.provides]
        + [c.label for c in hit.because if c.label not in rule.relations.caused_by]
        + [k for k, _m, _i in hit.claims if k not in rule.relations.claims]
    )
    if undeclared:
        raise MtplintError(
            f"check {rule.check} uses relation(s) {', '.join(sorted(set(undeclared)))} that {rule.code}'s "
            "[relations] does not declare",
            path=rule.source_file,
        )


def _downgrade_causes_without_consequences(findings: list[Finding], rules: dict[str, Rule]) -> None:
    """A rule may say its errors only matter through what they cause (a dead ignore entry
    is harmless once a runtime patch builds the draft right): without any consequence in
    this run, such a finding drops to the severity the rule names. Only when every rule that
    could report such a consequence was evaluated: --select/--ignore never change a severity."""
    causes = {f.caused_by for f in findings if f.caused_by}
    for f in findings:
        lower = rules[f.code].relations.without_consequences
        provides = set(rules[f.code].relations.provides)
        unevaluated = [c for c, r in load_rules().items() if provides & set(r.relations.caused_by) and c not in rules]
        if lower and f.severity == "error" and f.id not in causes and not unevaluated:
            f.severity = lower
            f.evidence["severity_note"] = "no consequence in this configuration"
