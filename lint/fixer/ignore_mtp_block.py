"""ignore-unquantized-mtp-block (MTP002): exclude the draft modules vLLM builds quantized
while the checkpoint stores them unquantized, by their construction prefixes.

Exact names only: they say precisely which modules change, and a layer-wide entry is
what rewrite-ignore-to-runtime-names writes when a dead entry meant the whole layer.
"""

from __future__ import annotations

from ..core.findings import Finding
from ..inventory.model import Inventory
from ..probe.report import Model, ProbeReport
from .plan import Change, PlanOptions

ID = "ignore-unquantized-mtp-block"


def plan(
    inventory: Inventory, report: ProbeReport, findings: list[Finding], *, options: PlanOptions | None = None
) -> list[Change]:
    from ..view.report_view import ReportView
    from .exclusion_list import exclusion_list, feeders, runtime_entries

    wanted: list[tuple[Model, str]] = []
    for f in findings:
        ev = f.evidence or {}
        # Target modules fed unquantized tensors are not an MTP block: their dead or
        # missing entry is MTP001's (or the quantizer's) business.
        if ID in f.fixes.artifact and ev.get("model") == "draft" and ev.get("construction_prefix"):
            mp: tuple[Model, str] = ("draft", str(ev["construction_prefix"]))
            if mp not in wanted:
                wanted.append(mp)
    lst = exclusion_list(inventory)
    if not wanted or lst is None:
        return []
    ctx = ReportView(inventory, report)
    entries, notes = runtime_entries(ctx, lst, wanted, feeders(ctx), collapse=False)
    if not entries:
        return []
    changes = lst.add_change(ID, entries, f"exclude {', '.join(entries)} (unless an entry already covers them)")
    changes[0].notes = notes
    return changes
