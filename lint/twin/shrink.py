"""The twin's config and the map from a source tensor's name and shape to the twin's.

Sizes that kernels constrain are kept (head dims, MLA ranks: the CPU MLA decode needs
kv_lora_rank 512 and qk_rope_head_dim 64), as are expert counts (their names and router
shapes stay as shipped). Every other size shrinks; a source size maps to one twin size, so
equal dimensions stay equal. Layers: the first dense layer and the first MoE layer of the
trunk are kept, renumbered 0.., and trunk-numbered MTP layers N+i become N'+i.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import BadInput
from ..core.mtp_layout import text_config

HIDDEN, INTERMEDIATE, MOE_INTERMEDIATE, VOCAB, HEADS, Q_LORA = 256, 128, 64, 512, 2, 128
_TRUNK = re.compile(r"^((?:model\.)?(?:language_model\.)?layers\.)(\d+)\.")
# An exclusion entry's layer number, written plainly or escaped in a regex.
_ENTRY_LAYER = re.compile(r"(layers(?:\\)?\.)(\d+)")
_EXCLUSION_KEYS = ("ignore", "modules_to_not_convert", "exclude_modules")


@dataclass
class Plan:
    config: dict[str, Any]
    layers: dict[int, int]  # source trunk index -> twin index (MTP layers included)
    dims: dict[int, int]  # source size -> twin size
    ambiguous: dict[int, set[int]] = field(default_factory=dict)

    def rename(self, name: str) -> str | None:
        """The twin's name for a source tensor, or None where its layer is dropped."""
        m = _TRUNK.match(name)
        if not m:
            return name
        new = self.layers.get(int(m.group(2)))
        return None if new is None else f"{m.group(1)}{new}.{name[m.end() :]}"

    def shape(self, name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
        out = []
        for d in shape:
            if d in self.ambiguous:
                raise BadInput(f"{name}: dimension {d} is ambiguous (twin sizes {sorted(self.ambiguous[d])})")
            if d in self.dims:
                out.append(self.dims[d])
            elif d <= 1024:
                out.append(d)  # small and not a shrunk size: kept (scales, biases, ranks)
            else:
                raise BadInput(f"{name}: cannot shrink dimension {d} (no config size matches it)")
        return tuple(out)

    def rename_entry(self, entry: str) -> str | None:
        """An exclusion entry with its layer numbers renumbered; None where it names a dropped layer."""
        dropped = False

        def sub(m: re.Match[str]) -> str:
            nonlocal dropped
            new = self.layers.get(int(m.group(2)))
            if new is None:
                dropped = True
                return m.group(0)
            return f"{m.group(1)}{new}"

        out = _ENTRY_LAYER.sub(sub, entry)
        return None if dropped else out


def _int(cfg: Any, key: str) -> int | None:
    v = cfg.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _sizes(src: Any) -> tuple[list[tuple[int | None, int]], dict[str, int]]:
    """(source size -> twin size pairs, config fields -> twin values) for the widths."""
    hidden = _int(src, "hidden_size") or 0
    heads = _int(src, "num_attention_heads") or 1
    kv_heads = _int(src, "num_key_value_heads") or heads
    head_dim = _int(src, "head_dim") or hidden // heads
    new_heads = min(HEADS, heads)
    new_kv = new_heads if kv_heads == heads else 1
    pairs: list[tuple[int | None, int]] = [(hidden, HIDDEN), (2 * hidden, 2 * HIDDEN), (_int(src, "vocab_size"), VOCAB)]
    if not _int(src, "kv_lora_rank"):  # MLA has no head_dim-sized projections
        pairs += [
            (heads * head_dim, new_heads * head_dim),
            (kv_heads * head_dim, new_kv * head_dim),
            ((heads + 2 * kv_heads) * head_dim, (new_heads + 2 * new_kv) * head_dim),
        ]
    sizes = {
        "hidden_size": HIDDEN,
        "vocab_size": VOCAB,
        "num_attention_heads": new_heads,
        "num_key_value_heads": new_kv,
    }
    for key, new in (("intermediate_size", INTERMEDIATE), ("moe_intermediate_size", MOE_INTERMEDIATE)):
        v = _int(src, key)
        if v:
            sizes[key] = new
            pairs += [(v, new), (2 * v, 2 * new)]
    if _int(src, "q_lora_rank"):
        sizes["q_lora_rank"] = Q_LORA
        pairs.append((_int(src, "q_lora_rank"), Q_LORA))
    nope, rope, vhd = (_int(src, k) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    if nope and rope and vhd:
        pairs += [(heads * (nope + rope), new_heads * (nope + rope)), (heads * (nope + vhd), new_heads * (nope + vhd))]
        pairs += [(heads * vhd, new_heads * vhd)]
    return pairs, sizes


def _layers(src: Any, n_src: int) -> tuple[dict[int, int], dict[str, int]]:
    """Trunk layers kept (the first dense one, then the first MoE one) and MTP layers renumbered."""
    first_k = _int(src, "first_k_dense_replace")
    moe = bool(_int(src, "n_routed_experts") or _int(src, "num_experts"))
    keep = [0] if not moe or first_k else []
    if moe:
        keep.append(first_k or 0)
    keep = sorted(set(keep))
    layers = {s: i for i, s in enumerate(keep)}
    n_new = len(keep)
    depth = max(_int(src, "num_nextn_predict_layers") or 0, 0)
    for i in range(max(depth, 4)):  # trunk-numbered MTP layers, shipped or extra
        layers[n_src + i] = n_new + i
    sizes = {"num_hidden_layers": n_new}
    if first_k is not None:
        sizes["first_k_dense_replace"] = min(first_k, 1)
    if _int(src, "max_window_layers"):
        sizes["max_window_layers"] = n_new
    return layers, sizes


def _clamp_token_ids(cfg: dict[str, Any]) -> None:
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        v = cfg.get(key)
        if isinstance(v, int):
            cfg[key] = min(v, VOCAB - 1)
        elif isinstance(v, list):
            cfg[key] = [min(x, VOCAB - 1) for x in v if isinstance(x, int)]


def _dim_map(pairs: list[tuple[int | None, int]]) -> tuple[dict[int, int], dict[int, set[int]]]:
    dims: dict[int, int] = {}
    ambiguous: dict[int, set[int]] = {}
    for s, n in pairs:
        if s is None:
            continue
        if s in dims and dims[s] != n:
            ambiguous.setdefault(s, {dims[s]}).add(n)
        dims.setdefault(s, n)
    for s in ambiguous:
        dims.pop(s, None)
    return dims, ambiguous


def plan(config: dict[str, Any]) -> Plan:
    src = text_config(config)
    new_cfg = copy.deepcopy(config)
    tgt = text_config(new_cfg)
    assert isinstance(tgt, dict)
    n_src = _int(src, "num_hidden_layers")
    if not n_src or not _int(src, "hidden_size"):
        raise BadInput("config.json: no num_hidden_layers/hidden_size to shrink")
    pairs, sizes = _sizes(src)
    layers, layer_sizes = _layers(src, n_src)
    for k, v in {**sizes, **layer_sizes}.items():
        if k in tgt:
            tgt[k] = v
    _clamp_token_ids(tgt)
    dims, ambiguous = _dim_map(pairs)
    p = Plan(new_cfg, layers, dims, ambiguous)
    _renumber_exclusions(new_cfg, p)
    return p


def _renumber_exclusions(cfg: dict[str, Any], p: Plan) -> None:
    qc = cfg.get("quantization_config")
    if isinstance(qc, dict):
        renumber_quant_config(qc, p)


def renumber_quant_config(qc: dict[str, Any], p: Plan) -> None:
    """Exclusion lists renumbered in place (entries naming dropped layers go), as shipped otherwise."""
    for key, value in list(qc.items()):
        if key in _EXCLUSION_KEYS and isinstance(value, list):
            qc[key] = [e for e in (p.rename_entry(x) if isinstance(x, str) else x for x in value) if e is not None]
        elif isinstance(value, dict):
            renumber_quant_config(value, p)
