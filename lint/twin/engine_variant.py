"""The engine variant of the twin: trunk layers in a format the CPU engine cannot run (quantized
MoE experts, NVFP4/MXFP4, block FP8, ...) stored BF16 and excluded in the twin's quantization
config, in the producer's own exclusion list; the MTP block, its formats and every exclusion
entry that touches it stay exactly as shipped.

Why it is sound: the acceptance construction (values.py) gives every trunk MoE expert, attention
and MLP output a zero value, so a trunk layer contributes nothing whichever format holds it; what
the engine then confirms is the MTP block's loading and drafting. It is valid only where no
finding of the lint involves the layers it converts: there the format itself is in question and
storing it BF16 would hide what the engine should judge.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..core.mtp_layout import is_mtp_name, num_hidden_layers
from ..inventory.fingerprint import is_fused_expert_module
from ..inventory.model import Inventory, TensorInfo
from . import shrink, values

# Where each producer lists the layers it left unquantized, when the checkpoint declares none
# (vLLM reads these keys: CompressedTensorsConfig.ignore, ModelOpt exclude_modules / ignore,
# QuarkConfig exclude, Fp8Config ignored_layers, AWQ modules_to_not_convert, GPTQ "-:" dynamic,
# AutoRound (vLLM's INCConfig) extra_config: a layer named there with bits 16 is unquantized).
_DEFAULT_KEY = {
    "compressed-tensors": "quantization_config.ignore",
    "modelopt": "quantization_config.ignore",
    "modelopt_fp4": "quantization_config.ignore",
    "quark": "quantization_config.exclude",
    "fp8": "quantization_config.ignored_layers",
    "awq": "quantization_config.modules_to_not_convert",
    "gptq": "quantization_config.dynamic",
    "auto-round": "quantization_config.extra_config",
}
# What AutoRound writes for a layer it left in 16 bits (INCConfig.get_quant_method reads "bits").
_AUTO_ROUND_UNQUANTIZED = {"bits": 16, "data_type": "float"}
_BITS_KEYS = ("bits", "w_bit", "num_bits")


@dataclass
class Variant:
    """What the variant converts (source module -> its format) and why it ran."""

    modules: dict[str, str]
    file: str  # the file holding the exclusion list the entries go to
    key: str  # its dotted key there, e.g. "quantization_config.ignore"
    why: str
    entries: list[str] = field(default_factory=list)  # added, in the twin's names (set by build)

    def describe(self) -> dict[str, Any]:
        kinds = sorted(set(self.modules.values()))
        return {
            "name": "bf16-trunk",
            "why": self.why,
            "converted_modules": len(self.modules),
            "converted_formats": kinds,
            "exclusion_list": f"{self.file}: {self.key}",
            "entries_added": self.entries,
        }


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(obj, (list, tuple)):
        return [s for v in obj for s in _strings(v)]
    return []


def _entry_matches(entry: str, module: str) -> bool:
    """An exclusion entry read as every producer may mean it: exact, prefix, glob or regex."""
    body = entry.removeprefix("-:").removeprefix("+:")
    if body.startswith("re:"):
        body = body[3:]
    if module == body or module.startswith(body + ".") or fnmatch.fnmatchcase(module, body):
        return True
    try:
        return re.match(body, module) is not None
    except re.error:
        return False


def _owners(converted: set[str]) -> set[str]:
    """The vLLM layers the converted modules load into (a fused qkv/gate_up layer or a FusedMoE
    layer holds several), under the checkpoint's names and vLLM's (Qwen3.5: language_model.model.)."""
    out: set[str] = set()
    for m in converted:
        owner = layer_entry(m) if ".experts." in m else m.rsplit(".", 1)[0]
        out.add(owner)
        if owner.startswith("model.language_model."):
            out.add("language_model.model." + owner.removeprefix("model.language_model."))
    return out


def _involving(findings: list[dict[str, Any]], converted: set[str], exclusions: list[str]) -> dict[str, Any] | None:
    """The first finding that involves a converted trunk layer: one about the target model's
    construction or loading (the trunk is in question), one naming a module, tensor or vLLM layer
    that a converted module belongs to, or an exclusion entry that matches one."""
    sample = sorted(converted)
    touching = {e for e in exclusions if any(_entry_matches(e, m) for m in sample[:2000])}
    owners = _owners(converted)
    for f in findings:
        evidence = f.get("evidence") or {}
        if isinstance(evidence, dict) and evidence.get("model") == "target":
            return f
        loc = f.get("location") or {}
        key = f.get("key", "")
        names = [loc.get("tensor") or "", key, key.partition(":")[2], *_strings(evidence)]
        names += [w.strip("'\",;:()[]{}") for w in str(f.get("message", "")).split()]
        for s in names:
            if not s:
                continue
            if s in touching or s in converted:
                return f
            parts = s.split(".")
            if any(".".join(parts[:i]) in owners for i in range(1, len(parts) + 1)):
                return f
    return None


def plan(
    inv: Inventory,
    blockers: dict[str, str],
    findings: list[dict[str, Any]],
    engine: str,
) -> Variant | str | None:
    """None: the engine runs every format as shipped. A Variant: it runs once the trunk's
    `blockers` (module -> why the engine cannot run it) are stored BF16. A string: why not even
    the variant can be served."""
    if not blockers:
        return None
    n = num_hidden_layers(inv.config)
    mtp = {m: why for m, why in blockers.items() if is_mtp_name(f"{m}.weight", n)}
    if mtp:
        why = mtp[min(mtp)]
        return f"the MTP block itself: {why} (the engine variant stores only trunk layers BF16)"
    method = inv.declared.method
    file = inv.declared.source or "config.json"
    key = inv.declared.exclusion_key or _DEFAULT_KEY.get(method or "")
    if key is None or method not in _DEFAULT_KEY:
        why = blockers[min(blockers)]
        return f"{why}; the engine variant knows no exclusion list for quantization method {method!r}"
    fused = sorted(m for m in blockers if is_fused_expert_module(m))
    if fused:
        return f"{blockers[fused[0]]}; the engine variant does not convert fused 3-D expert tensors ({fused[0]})"
    converted = set(blockers)
    hit = _involving(findings, converted, inv.declared.exclusions)
    why = blockers[min(blockers)]
    if hit is not None:
        return (
            f"{why}; the engine variant (those trunk layers BF16) is not valid: finding {hit.get('code')} "
            f"({hit.get('key')}) involves them"
        )
    kinds = sorted({inv.modules[m].kind for m in converted if m in inv.modules})
    return Variant(
        modules={m: inv.modules[m].kind if m in inv.modules else "?" for m in converted},
        file=file,
        key=key,
        why=f"{engine} cannot run the trunk's {', '.join(kinds)} layers ({why.split(': ', 1)[0]}); no finding involves "
        "them, so the twin stores them BF16 and excludes them, the MTP block as shipped",
    )


def _bits(config: dict[str, Any]) -> int:
    qc = config.get("quantization_config") or {}
    for k in _BITS_KEYS:
        if isinstance(qc.get(k), int):
            return int(qc[k])
    for group in (qc.get("config_groups") or {}).values():
        bits = ((group or {}).get("weights") or {}).get("num_bits")
        if isinstance(bits, int):
            return bits
    return 4


def logical_shape(leaves: dict[str, TensorInfo], kind: str, config: dict[str, Any]) -> tuple[int, ...] | None:
    """The (out, in) shape of a quantized module's dequantized weight, from its packed tensors."""
    bits = _bits(config)
    if "qweight" in leaves:
        rows, cols = leaves["qweight"].shape[:2]
        if kind == "awq":  # [in, out * bits / 32]
            return (cols * 32 // bits, rows)
        return (cols, rows * 32 // bits)  # GPTQ: [in * bits / 32, out]
    for leaf in ("weight_packed", "weight"):
        t = leaves.get(leaf)
        if t is None or len(t.shape) != 2:
            continue
        o, i = t.shape
        if t.dtype == "U8" and ("fp4" in kind or "mxfp4" in kind or "nvfp4" in kind):
            return (o, i * 2)  # two FP4 codes a byte
        if t.dtype in ("I32", "U32") and leaf == "weight_packed":
            return (o, i * 32 // bits)
        return (o, i)
    return None


def bf16_tensors(
    module: str, leaves: dict[str, TensorInfo], kind: str, p: shrink.Plan, config: dict[str, Any]
) -> dict[str, torch.Tensor]:
    """A converted trunk module as an unquantized one: its construction value BF16 (and its bias),
    no scales, zero points or packed codes."""
    src = logical_shape(leaves, kind, config)
    new_module = p.rename(f"{module}.weight")
    if src is None or new_module is None:
        raise ValueError(f"{module}: no weight shape to store BF16 ({kind})")
    new_module = new_module.removesuffix(".weight")
    shape = p.shape(f"{module}.weight", src)
    out = {f"{new_module}.weight": values.logical(new_module, "weight", shape, False).to(torch.bfloat16)}
    if "bias" in leaves:
        b = leaves["bias"]
        out[f"{new_module}.bias"] = torch.zeros(p.shape(f"{module}.bias", tuple(b.shape))).to(torch.bfloat16)
    return out


def layer_entry(module: str) -> str:
    """The vLLM layer an exclusion entry must name: a MoE expert's is its FusedMoE layer."""
    head, sep, _ = module.partition(".experts.")
    return f"{head}.experts" if sep else module


def exclude(twin: Path, variant: Variant, p: shrink.Plan, mtp_modules: list[str]) -> None:
    """Append the converted layers (twin names) to the twin's own exclusion list, as the producer
    writes it; entries already there stay as shipped."""
    entries: list[str] = []
    for m in sorted(variant.modules):
        new = p.rename(f"{m}.weight")
        if new is None:
            continue
        e = layer_entry(new.removesuffix(".weight"))
        if e not in entries:
            entries.append(e)
    for e in entries:  # an added entry must not reach the MTP block (producers match by substring too)
        hit = next((m for m in mtp_modules if e in m or _entry_matches(e, m)), None)
        if hit is not None:
            raise ValueError(f"exclusion entry {e!r} would reach the MTP block ({hit})")
    path = twin / variant.file
    data = json.loads(path.read_text())
    *parents, last = variant.key.split(".")
    node = data
    for k in parents:
        node = node.setdefault(k, {})
    _append(node, last, entries)
    path.write_text(json.dumps(data, indent=2) + "\n")
    variant.entries = entries


def _append(node: dict[str, Any], last: str, entries: list[str]) -> None:
    """The entries added to the list (or map) at node[last], as the producer writes it."""
    if last == "dynamic":  # GPTQ: a "-:" regex skips a layer (re.match from the layer name's start)
        dyn = node.setdefault("dynamic", {})
        for e in entries:
            dyn[f"-:{re.escape(e)}"] = {}
    elif last == "extra_config":  # AutoRound: an exact layer name (INC matches it before any pattern)
        extra = node.setdefault("extra_config", {})
        for e in entries:
            extra.setdefault(e, dict(_AUTO_ROUND_UNQUANTIZED))
    else:
        lst = node.get(last)
        lst = list(lst) if isinstance(lst, list) else []
        lst += [e for e in entries if e not in lst]
        node[last] = lst
