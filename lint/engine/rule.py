"""A rule as loaded from its declarative file in rules/ (one TOML file per rule)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.findings import Severity
from ..core.versions import in_range

# What a rule's findings can claim, so that a catch-all rule reports only the rest.
CLAIM_KINDS = ("load-error", "construction-error", "reference-drift")


@dataclass
class Explanation:
    what: str  # what the rule checks
    why: str  # what breaks and why
    example: str  # a concrete failing case
    fix: str  # how to fix it (artifact side and runtime side)


@dataclass
class Relations:
    """How a rule's findings relate to other rules' findings, declared in its `[relations]`.

    The engine orders the rules from these (a provider before its consumers, claimers before
    the catch-all that reports what nobody claimed, explicit `before`) and links each finding
    to the first registered finding among the causes its check names."""

    # Cause labels a finding of this rule can stand for ("quant-mismatch", "mtp-missing").
    provides: list[str] = field(default_factory=list)
    # Cause labels this rule's findings may link to as their root cause.
    caused_by: list[str] = field(default_factory=list)
    # Evidence kinds its findings account for (CLAIM_KINDS).
    claims: list[str] = field(default_factory=list)
    # Evidence kinds it reports for whatever no other rule claimed.
    reports_unclaimed: list[str] = field(default_factory=list)
    # Rules that must run after this one: where two rules provide one cause, the first wins.
    before: list[str] = field(default_factory=list)
    # An error-level finding that causes nothing in this run drops to this severity
    # (a dead ignore entry is harmless once a runtime patch builds the draft right).
    without_consequences: Severity | None = None


@dataclass
class AppliesTo:
    """Where a rule can fire; elsewhere the engine does not run its check (it passes)."""

    architectures: list[str] = field(default_factory=list)  # target architectures; empty: all
    vllm: str = ""  # a version specifier ("<0.30"); empty: all

    def matches(self, architecture: str | None, vllm_version: str | None) -> bool:
        if self.architectures and architecture not in self.architectures:
            return False
        return not (self.vllm and vllm_version) or in_range(vllm_version, self.vllm)

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in (("architectures", self.architectures), ("vllm", self.vllm)) if v}


@dataclass
class Rule:
    code: str  # stable code, "MTP002"
    name: str  # readable kebab-case name, "quantized-layer-fed-unquantized"
    severity: Severity  # default severity
    summary: str  # one line
    explanation: Explanation
    check: str  # name of the check function in mtplint.checks
    options: Any = None  # the check's options object, validated from `[options]`
    message: str = ""  # message template, str.format()-ed with the check's fields
    references: list[str] = field(default_factory=list)  # upstream issues / PRs (URLs)
    fixes: dict[str, list[str]] = field(default_factory=lambda: {"patches": [], "artifact": []})
    relations: Relations = field(default_factory=Relations)
    applies_to: AppliesTo = field(default_factory=AppliesTo)
    source_file: str = ""

    @property
    def help_uri(self) -> str:
        return rule_doc_uri(self.code)


# Each rule's page, generated from its file by scripts/gen_rule_docs.py (docs/rules/MTPxxx.md).
RULE_DOCS_BASE = "https://github.com/mtplint/mtplint/blob/main/docs/rules/"


def rule_doc_uri(code: str) -> str:
    return f"{RULE_DOCS_BASE}{code}.md"
