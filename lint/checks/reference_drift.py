"""Checks that compare the MTP block with the --reference checkpoint it was converted from
(catalog MTPL-027): stored below the source's precision (MTP019), or changed without losing
bits (MTP020). Both are silent without --reference; the facts come from
lint/inventory/reference.py, the probe plays no part (basis "reference")."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.findings import Location
from ..inventory.reference import Comparison, PairedModule
from . import check
from .context import Context, Hit

# Evidence kind: an MTP module one of these rules reported (MTP019 claims, MTP020 skips).
DRIFT = "reference-drift"


@dataclass(frozen=True)
class PrecisionOptions:
    # Below this many bits per weight, an MTP block stored with fewer bits than its source is
    # reported even where the trunk has as few: FP8 releases of BF16 models keep their MTP
    # block at 8 bits and draft well; 4-bit MTP heads do not (vllm-mlx #471, GSQ #11).
    min_bits: float = 8.0


@check(fields=("layer", "count", "module", "changes"), options=PrecisionOptions)
def mtp_below_reference_precision(ctx: Context, options: PrecisionOptions) -> list[Hit]:
    """An MTP module stored with fewer bits per weight than the same module in the reference,
    and below `min_bits` or below what the artifact's trunk keeps for the same role."""
    cmp = ctx.reference_comparison
    if cmp is None:
        return []
    lowered = [p for p in cmp.pairs if p.lost_bits and _why_low(p, options.min_bits)]
    return [
        _hit(
            ctx, cmp, layer, pairs, lambda p: _why_low(p, options.min_bits), [(DRIFT, "draft", p.module) for p in pairs]
        )
        for layer, pairs in _by_layer(lowered)
    ]


@check(fields=("layer", "count", "module", "changes"))
def mtp_changed_from_reference(ctx: Context, options: None) -> list[Hit]:
    """An MTP module whose on-disk format differs from the reference's without losing bits
    (a requant at equal width, a scale re-layout, a dequant), or whose format and shapes are
    the same but whose sampled bytes differ."""
    cmp = ctx.reference_comparison
    if cmp is None:
        return []
    changed = [
        p
        for p in cmp.pairs
        if not ctx.claimed(DRIFT, "draft", p.module) and not p.lost_bits and _why_changed(p) is not None
    ]
    return [_hit(ctx, cmp, layer, pairs, lambda p: str(_why_changed(p)), []) for layer, pairs in _by_layer(changed)]


def _why_low(p: PairedModule, min_bits: float) -> str:
    if p.bits is None:
        return ""
    if p.bits < min_bits:
        return f"below {_fmt(min_bits)} bits"
    if p.trunk_bits is not None and p.bits < p.trunk_bits:
        if p.trunk_same_module:
            return f"below the trunk's {_fmt(p.trunk_bits)} bits for the same module"
        return f"below the {_fmt(p.trunk_bits)} bits most of the trunk's matrices keep"
    return ""


def _why_changed(p: PairedModule) -> str | None:
    if p.format_changed:
        if p.bits is not None and p.reference_bits is not None and p.bits > p.reference_bits:
            return "dequantized"
        return "re-quantized or re-laid-out at the same width"
    if p.sample is not None and p.sample.status == "differs":
        return "same format and shapes, different bytes in the sampled windows"
    return None


def _by_layer(pairs: list[PairedModule]) -> list[tuple[str, list[PairedModule]]]:
    """Findings per MTP layer (shared parts such as `mtp.fc` under "shared"), in layer order."""
    groups: defaultdict[str, list[PairedModule]] = defaultdict(list)
    for p in pairs:
        groups["shared" if p.layer is None else str(p.layer)].append(p)
    return sorted(groups.items(), key=lambda kv: (kv[0] == "shared", int(kv[0]) if kv[0].isdigit() else 0))


def _hit(
    ctx: Context,
    cmp: Comparison,
    layer: str,
    pairs: list[PairedModule],
    why: Callable[[PairedModule], str],
    claims: list[Any],
) -> Hit:
    first = pairs[0]
    # One clause per kind of change: "768 fp4-dsv4 -> bf16 (4 -> 16 bits per weight, dequantized)".
    changes: Counter[tuple[str, str, str, str, str]] = Counter(
        (p.reference.kind, p.artifact.kind, _fmt(p.reference_bits), _fmt(p.bits), why(p)) for p in pairs
    )
    clauses = [
        f"{n} {ref} -> {art} ({rb} -> {ab} bits per weight, {reason})"
        for (ref, art, rb, ab, reason), n in sorted(changes.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    evidence: dict[str, Any] = {
        "reference": ctx.inputs.reference or str(ctx.reference.root if ctx.reference else ""),
        "modules": [p.module for p in pairs[:10]],
        "bits_per_weight": {p.module: {"reference": p.reference_bits, "here": p.bits} for p in pairs[:5]},
    }
    if first.trunk_bits is not None:
        evidence["trunk_bits"] = first.trunk_bits
    sampled = [p for p in pairs if p.sample is not None and p.sample.status == "differs"]
    if sampled:
        evidence["sampled_bytes_differ"] = [p.module for p in sampled[:10]]
    evidence["sampling"] = cmp.unsampled or _sampling(cmp)
    return Hit(
        key=f"mtp-layer-{layer}",
        fields={
            "layer": "shared modules" if layer == "shared" else f"layer {layer}",
            "count": len(pairs),
            "module": first.module,
            "changes": ", ".join(clauses),
        },
        location=Location(file=first.file, tensor=first.tensor),
        evidence=evidence,
        basis="reference",
        claims=claims,
    )


def _sampling(cmp: Comparison) -> str:
    """What the sampled windows said over the whole block, e.g. "12 module(s) with the reference's
    format and shapes sampled: 11 same, 1 differs"."""
    said = Counter(p.sample.status for p in cmp.pairs if p.sample is not None)
    counts = ", ".join(f"{n} {status}" for status, n in sorted(said.items())) or "none"
    return (
        f"{cmp.sampled_modules} module(s) with the reference's format and shapes sampled (start, middle and end "
        f"windows of the main weight tensor; an all-zero window is no data): {counts}"
    )


def _fmt(bits: float | None) -> str:
    if bits is None:
        return "?"
    return str(int(bits)) if float(bits).is_integer() else f"{bits:.2f}"
