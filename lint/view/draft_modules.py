"""The modules vLLM builds for the draft, each with what the checkpoint stores for it and what
vLLM builds: the facts of the draft's module table (reporters/modules.py adds each row's
findings). Small and plain, so a remembered lint keeps them and `-v` needs no probe report."""

from __future__ import annotations

from collections import Counter
from dataclasses import astuple, dataclass
from typing import Any

from ..inventory.model import Inventory
from ..probe.report import ProbeReport
from .report_view import ReportView, is_quantized_method


@dataclass(frozen=True)
class DraftModule:
    label: str  # on-disk name(s) where tensors feed it, else the runtime module path
    on_disk: str  # format kind(s) of those tensors, "-" when none feed it (shared from the target)
    builds: str  # the quant scheme or method vLLM picked, or "unquantized"
    prefix: str  # construction prefix (what findings about it are keyed by)
    module_path: str  # its path in the built model

    def to_json(self) -> list[str]:
        return list(astuple(self))

    @classmethod
    def from_json(cls, data: Any) -> DraftModule:
        if not (isinstance(data, list) and len(data) == 5 and all(isinstance(x, str) for x in data)):
            raise ValueError("a draft module is five strings")
        return cls(*data)


def draft_modules(inventory: Inventory, report: ProbeReport | Any) -> list[DraftModule]:
    if not isinstance(report, ProbeReport):
        report = ProbeReport.from_json(dict(report))
    ctx = ReportView(inventory, report)
    ondisk: dict[str, set[str]] = {}
    for module, model, prefix in ctx.ondisk_to_runtime:
        if model == "draft":
            ondisk.setdefault(prefix, set()).add(module)
    out = []
    for d in ctx.decisions("draft"):
        names = sorted(ondisk.get(d.prefix, ()))
        kinds = sorted({inventory.modules[n].kind for n in names if n in inventory.modules})
        builds = (d.scheme or d.method) if is_quantized_method(d.method) else "unquantized"
        label = _names(names) if names else d.module_path
        out.append(DraftModule(label, ", ".join(kinds) or "-", str(builds), d.prefix, d.module_path))
    return out


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
