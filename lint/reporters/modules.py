"""The draft at a glance: one row per module vLLM builds for the MTP draft, with what the
checkpoint stores for it, what vLLM builds, and which findings it has.

Read from the probe's construction decisions and load attribution, the inventory's per-module
formats, and the findings' keys; shown in the full text report and the GitHub job summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.findings import Finding
    from ..inventory.model import Inventory
    from ..probe.report import ProbeReport
    from ..view.draft_modules import DraftModule

HEADERS = ("draft module", "on disk", "vLLM builds", "outcome")


@dataclass(frozen=True)
class ModuleRow:
    module: str  # on-disk name(s) where tensors feed it, else the runtime module path
    on_disk: str  # format kind(s) of those tensors, "-" when none feed it (shared from the target)
    builds: str  # the quant scheme or method vLLM picked, or "unquantized"
    outcome: str  # "ok", or the codes of the findings about it

    def cells(self) -> tuple[str, str, str, str]:
        return (self.module, self.on_disk, self.builds, self.outcome)


def draft_modules(inventory: Inventory, report: ProbeReport | Any, findings: list[Finding]) -> list[ModuleRow]:
    from ..view.draft_modules import draft_modules as facts

    return rows(facts(inventory, report), findings)


def rows(modules: list[DraftModule], findings: list[Finding]) -> list[ModuleRow]:
    """The table's rows: each module's facts and the codes of the findings about it."""
    out = []
    for m in modules:
        codes = sorted({f.code for f in findings if _about(f, m.prefix, m.module_path)})
        out.append(ModuleRow(module=m.label, on_disk=m.on_disk, builds=m.builds, outcome=", ".join(codes) or "ok"))
    return out


def _about(f: Finding, prefix: str, module: str) -> bool:
    """A finding keyed on this module (by construction prefix or module path), or on one of
    its parameters or submodules (`...experts.routed_experts`)."""
    key = f.key.removeprefix("draft:")
    if any(key == m or key.startswith(m + ".") for m in (prefix, module)):
        return True
    return f.evidence.get("model") == "draft" and f.evidence.get("construction_prefix") == prefix


def table_lines(rows: list[ModuleRow]) -> list[str]:
    """A plain-text table, columns padded to their widest cell."""
    cells = [HEADERS, *(r.cells() for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS))]
    return ["  ".join(c[i].ljust(widths[i]) for i in range(len(HEADERS))).rstrip() for c in cells]
