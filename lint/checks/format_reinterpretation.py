"""Layers built for one quantized format and fed another of the same width, without an error
(MTP017): the bytes load, their meaning does not."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.findings import Location
from ..probe.report import MODELS
from . import check
from .context import Cause, Context, Hit

# Format families: the on-disk kinds (lint/inventory/fingerprint.py) a family's quant
# methods read. Only families whose bytes fit each other's slots without a shape error belong
# here; a BF16 weight in a quantized slot is MTP002's.
_FAMILIES: dict[str, list[str]] = {
    "NVFP4": ["modelopt-nvfp4", "ct-nvfp4"],
    "MXFP4": ["mxfp4", "fp4-dsv4"],
}
# Quant method (or compressed-tensors scheme) class -> the family its weights are read as,
# from vLLM 0.33.0: modelopt.py (ModelOptNvFp4FusedMoE: U8 weight + F8_E4M3 weight_scale +
# F32 weight_scale_2 / input_scale), mxfp4.py (Mxfp4MoEMethod, GptOssMxfp4MoEMethod: U8
# weight + E8M0 weight_scale per 32), compressed_tensors_moe/ and schemes/ (W4A4 Nvfp4/Mxfp4).
_METHODS: dict[str, str] = {
    "ModelOptNvFp4FusedMoE": "NVFP4",
    "CompressedTensorsW4A4Nvfp4MoEMethod": "NVFP4",
    "CompressedTensorsW4A4Fp4": "NVFP4",
    "QuarkNvfp4MoEMethod": "NVFP4",
    "Mxfp4MoEMethod": "MXFP4",
    "GptOssMxfp4MoEMethod": "MXFP4",
    "CompressedTensorsW4A4Mxfp4MoEMethod": "MXFP4",
    "CompressedTensorsW4A8Mxfp4MoEMethod": "MXFP4",
    "CompressedTensorsW4A4Mxfp4": "MXFP4",
    "CompressedTensorsW4A8Mxfp4": "MXFP4",
}


@dataclass(frozen=True)
class ReinterpretOptions:
    families: dict[str, list[str]] = field(default_factory=lambda: dict(_FAMILIES))
    methods: dict[str, str] = field(default_factory=lambda: dict(_METHODS))


def _exclusion_causes(model: str, prefix: str) -> list[Cause]:
    """A layer built for the wrong format is most likely the consequence of a dead exclusion
    entry meant for it, or (draft) of one meant for the MTP block."""
    causes = [Cause("exclusion-missed", (model, prefix))]
    return [*causes, Cause("mtp-exclusion")] if model == "draft" else causes


@check(fields=("module", "built", "method", "disk", "disk_format", "tensor"), options=ReinterpretOptions)
def format_reinterpreted(ctx: Context, options: ReinterpretOptions) -> list[Hit]:
    """For every tensor the dry run fed into a parameter: the method vLLM built the owning
    layer with (construction decision) against the on-disk format of the tensor's module
    (fingerprint). Fires when both belong to known format families and the families differ,
    whether or not the load raised."""
    family_of_kind = {k: fam for fam, kinds in options.families.items() for k in kinds}
    hits: dict[str, Hit] = {}
    for model in MODELS:
        for tensor, params, disk in ctx.fed_formats(model):
            disk_family = family_of_kind.get(disk.kind) if disk is not None else None
            if disk is None or disk_family is None:
                continue
            for p in params:
                decision = ctx.decision_for_module_path(model, p.rsplit(".", 1)[0])
                if decision is None:
                    continue
                built = options.methods.get(decision.scheme or "") or options.methods.get(decision.method or "")
                if built is None or built == disk_family:
                    continue
                key = f"{model}:{decision.prefix}"
                info = ctx.params(model).get(p)
                on_disk = ctx.inventory.tensors.get(tensor)
                # What the bytes are stored as -> the slot that reads them.
                pair = f"{on_disk.dtype if on_disk else '?'} -> {p.rsplit('.', 1)[-1]} {info.dtype if info else '?'}"
                if key in hits:
                    hits[key].evidence["tensors"] += 1
                    if pair not in hits[key].evidence["loaded_as"]:
                        hits[key].evidence["loaded_as"].append(pair)
                    continue
                module = decision.module_path
                hits[key] = Hit(
                    key=key,
                    fields={
                        "module": module,
                        "built": built,
                        "method": decision.scheme or decision.method,
                        "disk": disk_family,
                        "disk_format": disk.kind,
                        "tensor": tensor,
                    },
                    location=Location(file=ctx.tensor_file(tensor), tensor=tensor),
                    evidence={
                        "model": model,
                        "construction_prefix": decision.prefix,
                        "layer_class": decision.layer_class,
                        "loaded_as": [pair],
                        "load_raised": any(e.tensor == tensor for _m, e in ctx.load_errors(model)),
                        "tensors": 1,
                    },
                    because=_exclusion_causes(model, decision.prefix),
                    provides=[Cause("quant-mismatch", (model, module))],
                )
    return list(hits.values())
