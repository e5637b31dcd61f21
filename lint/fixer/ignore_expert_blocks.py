"""ignore-expert-blocks-as-compared (MTP001): where a config reads its exclusion list only
for some blocks, through a method of its own that compares the entries with one name per
block, write that name into that list in place of the dead entries that miss it.

The case it exists for: DeepSeek-V4's native DeepseekV4FP8Config (vLLM 0.33.0, NVIDIA's
NVFP4-experts exports, `moe_quant_algo: NVFP4`) consults `quantization_config.ignore` only in
`_is_nvfp4_expert_layer(prefix)`, and fnmatches the entries against the routed-expert block's
ON-DISK aggregate name (`mtp.0.ffn.experts` for the draft's `model.layers.43.ffn.experts`).
A per-Linear export lists `mtp.0.ffn.experts.K.wJ` (768 entries on Flash), none of which is
that name, so the draft's MXFP4 experts are built NVFP4. The probe records, per block vLLM
asked about, the name it compared (MTP001's `evidence.vllm_compares`); this fix writes
exactly that name (not a runtime name, not a pattern) at the place of the first entry it
replaces, drops the replaced entries, and leaves every other entry as it is and in order.
hf_quant_config.json gets the same edit where it carries the same entries.
"""

from __future__ import annotations

from typing import Any

from ..core.findings import Finding
from ..inventory.model import Inventory
from ..probe.report import ExclusionSection, Layer, ProbeReport
from .plan import Change, PlanOptions, get_key, set_key

ID = "ignore-expert-blocks-as-compared"
HF_QUANT = "hf_quant_config.json"
# Where a ModelOpt hf_quant_config.json repeats config.json's list.
_HF_KEYS = ("quantization.exclude_modules", "quantization.ignore", "exclude_modules", "ignore")


def _replace(value: Any, dead: set[str], names: list[str]) -> list[str] | None:
    """`value` without the `dead` entries, `names` (those not already there) where the
    first dead entry was; None when the list holds none of them (nothing to replace)."""
    if not isinstance(value, list) or not any(isinstance(e, str) and e in dead for e in value):
        return None
    out: list[str] = []
    placed = False
    for e in value:
        if isinstance(e, str) and e in dead:
            if not placed:
                out += [n for n in names if n not in value and n not in out]
                placed = True
            continue
        out.append(e)
    return out


def _edit(key: str, dead: set[str], names: list[str]):
    def edit(doc: dict[str, Any]) -> None:
        new = _replace(get_key(doc, key), dead, names)
        if new is not None:
            set_key(doc, key, new)

    return edit


def plan(
    inventory: Inventory, report: ProbeReport, findings: list[Finding], *, options: PlanOptions | None = None
) -> list[Change]:
    from ..view.exclusions import aimed_groups
    from ..view.report_view import ReportView

    aimed = [
        (f, key)
        for f in findings
        if ID in f.fixes.artifact and (f.evidence or {}).get("vllm_compares") and (key := f.location.config_key)
    ]
    if not aimed:
        return []
    ctx = ReportView(inventory, report)
    config_file = inventory.config_path.name
    changes: list[Change] = []
    groups_by_key: dict[str, dict] = {}
    for f, key in aimed:
        if key not in groups_by_key:
            groups_by_key[key] = aimed_groups(ctx, key)
        # The finding's key is the first entry of its group (as vLLM matched it).
        group = next(
            ((asked, members) for asked, members in groups_by_key[key].items() if members and members[0][0] == f.key),
            None,
        )
        if group is None:
            continue
        asked, members = group
        section = next(s for k, s in _sections(ctx) if k == key)
        consulted = section.consulted or {}
        compared = [consulted.get(Layer(m, p)) for m, p in asked]
        known = [c for c in compared if c is not None]
        if not compared or len(known) < len(compared):
            continue  # vLLM's compared name is unknown for some block: nothing sure to write
        names = sorted(set(known))
        written = section.as_written
        dead = [written.get(m[0], m[0]) for m in members]
        dead_set = set(dead)
        shown = f"{dead[0]!r}" if len(dead) == 1 else f"{len(dead)} dead entries {dead[0]!r} .. {dead[-1]!r}"
        summary = (
            f"replace {shown} with {', '.join(names)} (the name{'s' if len(names) > 1 else ''} "
            f"{section.via or 'vLLM'} compares them with)"
        )
        places = [(config_file, key)] if f.location.file in (None, config_file) else [(f.location.file, key)]
        hq = inventory.hf_quant_config
        if isinstance(hq, dict) and places[0][0] != HF_QUANT:
            # Other ModelOpt readers (TensorRT-LLM, older loaders) read hf_quant_config.json:
            # its copy of the list changes the same way, where it holds the same entries.
            places += [(HF_QUANT, k) for k in _HF_KEYS if _replace(get_key(hq, k), dead_set, names) is not None]
        for file, k in places:
            doc = inventory.config if file == config_file else hq if file == HF_QUANT else None
            if _replace(get_key(doc, k), dead_set, names) is None:
                continue
            what = (
                summary
                if (file, k) == places[0]
                else f"the same replacement ({len(dead)} entries -> {', '.join(names)}), in step with {places[0][0]}"
            )
            changes.append(Change(fix=ID, file=file, summary=f"{file}:{k}: {what}", edit=_edit(k, dead_set, names)))
    return changes


def _sections(ctx: Any) -> list[tuple[str, ExclusionSection]]:
    from ..view.exclusions import sections

    return sections(ctx)
