"""What a check sees: the report view (lint/view/report_view.py) and what earlier rules found.

The engine records each finding's claims and the causes it provides; a later check asks whether
its evidence is already accounted for and which finding its cause links to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.findings import Basis, Location, Severity
from ..core.run_inputs import RunInputs
from ..inventory.model import Inventory
from ..probe.report import ProbeReport
from ..view.report_view import ReportView


@dataclass(frozen=True)
class Cause:
    """A root cause a finding stands for, by label and subject: `Cause("quant-mismatch",
    ("draft", "model.layers.43.mtp_block.ffn.experts"))`. Labels are declared in the rule
    files' `[relations]`; checks never name another rule."""

    label: str
    subject: tuple[str, ...] = ()
    # Also match a cause registered for an ancestor of the last subject element (a module path).
    ancestors: bool = False

    def match_keys(self) -> list[tuple[str, ...]]:
        """The keys a provided cause may be registered under that this one matches."""
        if not (self.ancestors and self.subject):
            return [(self.label, *self.subject)]
        *head, path = self.subject
        out = []
        while path:
            out.append((self.label, *head, path))
            path = path.rsplit(".", 1)[0] if "." in path else ""
        return out


@dataclass
class Hit:
    """One thing a check found; the engine adds the rule's code, name and metadata."""

    key: str
    fields: dict[str, Any]
    location: Location
    evidence: dict[str, Any] = field(default_factory=dict)
    severity: Severity | None = None  # None: the rule's default
    basis: Basis = "probe"
    # The artifact fixes that apply to this hit, where only some of the rule's do.
    artifact_fixes: list[str] | None = None
    # Causes this finding stands for, for later rules' findings to link to.
    provides: list[Cause] = field(default_factory=list)
    # Causes this finding may be a consequence of, most specific first: it links to the first
    # one a finding of an earlier rule provides.
    because: list[Cause] = field(default_factory=list)
    # Evidence it accounts for: (kind, model, item), e.g. ("load-error", "draft", tensor).
    claims: list[tuple[str, str, str | None]] = field(default_factory=list)


class Context(ReportView):
    def __init__(
        self,
        inventory: Inventory,
        report: ProbeReport,
        inputs: RunInputs,
        reference: Inventory | None = None,
        target: Inventory | None = None,
    ):
        super().__init__(inventory, report, reference)
        self.inputs = inputs  # what this lint checked, under which serving settings
        # With a separate draft (the inventory linted): its target's inventory, else None.
        self.target = target
        # Filled by the engine from earlier rules' hits: evidence they claimed, and the
        # finding id standing for each cause (the first registered wins).
        self._claimed: set[tuple[str, str, str | None]] = set()
        self._causes: dict[tuple[str, ...], str] = {}

    # --- what earlier rules found (written by the engine only) ----------------------
    def claimed(self, kind: str, model: str, item: str | None) -> bool:
        """True when an earlier rule's finding accounts for this evidence."""
        return (kind, model, item) in self._claimed

    def cause_id(self, causes: list[Cause]) -> str | None:
        """The finding id of the first of `causes` an earlier finding provides."""
        for cause in causes:
            for key in cause.match_keys():
                if key in self._causes:
                    return self._causes[key]
        return None

    def record(self, finding_id: str, hit: Hit) -> None:
        self._claimed.update(hit.claims)
        for cause in hit.provides:
            self._causes.setdefault((cause.label, *cause.subject), finding_id)
