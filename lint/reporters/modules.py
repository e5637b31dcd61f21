"""The draft at a glance: one row per module vLLM builds for the MTP draft, with what the
checkpoint stores for it, what vLLM builds, and which findings it has.

Read from the probe's construction decisions and load attribution, the inventory's per-module
formats, and the findings' keys; shown in the full text report and the GitHub job summary.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.findings import Finding
    from ..inventory.model import Inventory
    from ..probe.report import ProbeReport

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
    from ..probe.report import ProbeReport
    from ..view.report_view import ReportView, is_quantized_method

    if not isinstance(report, ProbeReport):
        report = ProbeReport.from_json(dict(report))
    ctx = ReportView(inventory, report)
    ondisk: dict[str, set[str]] = {}
    for module, model, prefix in ctx.ondisk_to_runtime:
        if model == "draft":
            ondisk.setdefault(prefix, set()).add(module)
    rows = []
    for d in ctx.decisions("draft"):
        prefix, module = d.prefix, d.module_path
        names = sorted(ondisk.get(prefix, ()))
        kinds = sorted({inventory.modules[n].kind for n in names if n in inventory.modules})
        builds = (d.scheme or d.method) if is_quantized_method(d.method) else "unquantized"
        codes = sorted({f.code for f in findings if _about(f, prefix, module)})
        rows.append(
            ModuleRow(
                module=_names(names) if names else module,
                on_disk=", ".join(kinds) or "-",
                builds=str(builds),
                outcome=", ".join(codes) or "ok",
            )
        )
    return rows


def _about(f: Finding, prefix: str, module: str) -> bool:
    """A finding keyed on this module (by construction prefix or module path), or on one of
    its parameters or submodules (`...experts.routed_experts`)."""
    key = f.key.removeprefix("draft:")
    if any(key == m or key.startswith(m + ".") for m in (prefix, module)):
        return True
    return f.evidence.get("model") == "draft" and f.evidence.get("construction_prefix") == prefix


def _names(names: list[str]) -> str:
    """`mtp.0.e_proj`; `mtp.0.attn.{wkv,wq_a}` for a fused module; `mtp.0.ffn.experts.* (772)`."""
    if len(names) == 1:
        return names[0]
    parents = {n.rsplit(".", 1)[0] for n in names}
    if len(names) <= 4 and len(parents) == 1:
        parent = parents.pop()
        return f"{parent}.{{{','.join(n.rsplit('.', 1)[1] for n in names)}}}"
    # The deepest prefix nearly all of them share: a routed-experts block also takes a few
    # tensors from beside it (the gate's bias), which must not widen it to `mtp.0.ffn.*`.
    split = [n.split(".") for n in names]
    for depth in range(max(map(len, split)) - 1, 0, -1):
        counts = Counter(tuple(parts[:depth]) for parts in split if len(parts) > depth)
        if counts:
            common, n = counts.most_common(1)[0]
            if n >= 0.9 * len(names):
                return ".".join([*common, "*"]) + f" ({len(names)})"
    return f"{names[0]} (+{len(names) - 1})"


def table_lines(rows: list[ModuleRow]) -> list[str]:
    """A plain-text table, columns padded to their widest cell."""
    cells = [HEADERS, *(r.cells() for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS))]
    return ["  ".join(c[i].ljust(widths[i]) for i in range(len(HEADERS))).rstrip() for c in cells]
