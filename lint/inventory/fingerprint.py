"""Tell each module's on-disk quantization format from its tensor names, dtypes and shapes.

The kind strings name the *writer's* layout, because that is what a vLLM quant method
expects to load (see the research catalog, Part E). Rules compare them with what the
config declares and with what vLLM builds.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from operator import attrgetter

from .model import ModuleFormat, TensorInfo

KINDS = (
    "bf16",
    "fp16",
    "fp32",
    "fp8",  # F8 weight + weight_scale (ModelOpt / vLLM fp8 per-tensor or per-channel), or F8 with no scale
    "fp8-block",  # F8 weight + weight_scale_inv (DeepSeek/Qwen/GLM block FP8)
    "fp8-dsv4",  # F8 weight + bare .scale (DeepSeek-V4 native)
    "fp4-dsv4",  # I8 packed FP4 weight + F8_E8M0 bare .scale (DeepSeek-V4 experts)
    "ct-pack-quantized",  # weight_packed I32 + weight_scale (+ weight_shape)
    "ct-nvfp4",  # weight_packed U8 + weight_global_scale
    "ct-fp8",  # F8 weight + weight_scale written by compressed-tensors (float-quantized)
    "mxfp8",  # F8 weight + E8M0/U8 weight_scale (per-32 block)
    "modelopt-nvfp4",  # U8 weight + weight_scale + weight_scale_2
    "gptq",
    "awq",
    "mxfp4",  # *_blocks + *_scales (gpt-oss), or U8 weight/weight_packed + E8M0/U8 weight_scale
    "fp4-packed",  # U8 packed weight whose scales match no known writer
    "int8",
    "unknown",
)

FLOAT8_DTYPES = frozenset({"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"})
_E8M0_LIKE = frozenset({"F8_E8M0", "U8"})  # MX scales are e8m0; some writers store them as raw bytes
_PLAIN_KINDS = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}

# Leaves that only exist because the weight is quantized (weight-side companions).
WEIGHT_QUANT_LEAVES = frozenset(
    {
        "weight_scale",
        "weight_scale_inv",
        "weight_scale_2",
        "weight_global_scale",
        "weight_zero_point",
        "weight_g_idx",
        "weight_shape",
        "weight_packed",
        "input_scale",
        "input_global_scale",
        "input_zero_point",
        "qweight",
        "qzeros",
        "scales",
        "g_idx",
        "scale",
        "blocks",
    }
)
# Attention-cache scales: quantization metadata that carries no weight.
KV_SCALE_LEAVES = frozenset({"k_scale", "v_scale", "q_scale", "prob_scale", "output_scale"})

# 3-D fused expert parameters stored without a `.weight` leaf (HF MoE, gpt-oss, vLLM-native).
_FUSED_BASES = ("gate_up_proj", "down_proj", "gate_proj", "up_proj", "w13", "w1", "w2", "w3")
_FUSED_TAILS = tuple("experts." + b for b in _FUSED_BASES)
_FUSED_EXPERT = re.compile(rf"({'|'.join(_FUSED_BASES)})(?:_(\w+))?$")
_DTYPE_SHAPE = attrgetter("dtype", "shape")


def split_module(name: str) -> tuple[str, str]:
    """`a.b.c.weight` -> (`a.b.c`, `weight`).

    A fused 3-D expert parameter is its own module, keeping its leaf name as written:
    `...experts.gate_up_proj_blocks` -> (`...experts.gate_up_proj`, `gate_up_proj_blocks`).
    A name without a dot is a module of its own.
    """
    module, _, leaf = name.rpartition(".")
    if not module:
        return name, name
    if module.endswith("experts"):
        m = _FUSED_EXPERT.match(leaf)
        if m and (module == "experts" or module.endswith(".experts")):
            return f"{module}.{m.group(1)}", leaf
    return module, leaf


def canonical_leaf(module: str, leaf: str) -> str:
    """A fused expert leaf without its projection name, so it classifies like a Linear's leaf:
    `gate_up_proj_blocks` -> `blocks`, `w13_weight` -> `weight`, bare `gate_up_proj` -> `weight`."""
    base = module.rpartition(".")[2]
    if leaf == base:
        return "weight"
    if leaf.startswith(base + "_"):
        return leaf[len(base) + 1 :]
    return leaf


def is_fused_expert_module(module: str) -> bool:
    parent, _, base = module.rpartition(".")
    return base in _FUSED_BASES and (parent == "experts" or parent.endswith(".experts"))


def is_quantized_tensor_name(leaf: str) -> bool:
    """Whether a leaf name exists only in quantized checkpoints (scales, packed weights, zero points, KV scales)."""
    if leaf in WEIGHT_QUANT_LEAVES or leaf in KV_SCALE_LEAVES:
        return True
    # Fused expert leaves carry the companion after the projection name (`w13_weight_scale`);
    # a bare suffix test would also claim unrelated params such as DeepSeek-V4's `hc_attn_scale`.
    m = _FUSED_EXPERT.match(leaf)
    return bool(m and m.group(2) in WEIGHT_QUANT_LEAVES)


def is_kv_scale_name(leaf: str) -> bool:
    return leaf in KV_SCALE_LEAVES


def group_modules(tensors: Iterable[TensorInfo]) -> dict[str, dict[str, TensorInfo]]:
    """module -> {leaf as written: tensor}."""
    groups: defaultdict[str, dict[str, TensorInfo]] = defaultdict(dict)
    for t in tensors:
        module, _, leaf = t.name.rpartition(".")
        if not module or module.endswith("experts"):
            module, leaf = split_module(t.name)
        groups[module][leaf] = t
    return dict(groups)


def fingerprint_modules(tensors: Iterable[TensorInfo], hint: str | None = None) -> dict[str, ModuleFormat]:
    """Classify every module. `hint` is the declared vLLM quant method; it only settles ct-fp8 vs fp8,
    whose tensors look alike."""
    out: dict[str, ModuleFormat] = {}
    # Thousands of experts share one layout; classify each distinct (leaf, dtype, shape) set once.
    seen: dict[tuple, tuple[str, str | None, tuple[str, ...]]] = {}
    for module, leaves in group_modules(tensors).items():
        key = (
            module.endswith(_FUSED_TAILS) and is_fused_expert_module(module),
            tuple(leaves),
            tuple(map(_DTYPE_SHAPE, leaves.values())),
        )
        r = seen.get(key)
        if r is None:
            f = classify_module(module, leaves, hint)
            r = seen[key] = (f.kind, f.weight_dtype, f.suffixes)
        out[module] = ModuleFormat(module, *r)
    return out


def classify_module(module: str, leaves: Mapping[str, TensorInfo], hint: str | None = None) -> ModuleFormat:
    canon: Mapping[str, TensorInfo] = leaves
    if is_fused_expert_module(module):
        canon = {canonical_leaf(module, leaf): t for leaf, t in leaves.items()}
    kind, weight_dtype = _classify(canon, hint)
    return ModuleFormat(module=module, kind=kind, weight_dtype=weight_dtype, suffixes=tuple(sorted(leaves)))


def _classify(c: Mapping[str, TensorInfo], hint: str | None) -> tuple[str, str | None]:
    if "qweight" in c:
        return _gptq_or_awq(c), c["qweight"].dtype
    if "weight_packed" in c:
        return _ct_packed(c), c["weight_packed"].dtype
    if "blocks" in c:
        blocks = c["blocks"]
        return ("mxfp4" if "scales" in c else "fp4-packed"), blocks.dtype
    w = c.get("weight")
    if w is None:
        return _weightless(c)
    dt = w.dtype
    if dt in FLOAT8_DTYPES:
        return _fp8(c, hint), dt
    if dt == "U8":
        return _u8(c), dt
    if dt == "I8":
        s = c.get("scale")
        return ("fp4-dsv4" if s is not None and s.dtype == "F8_E8M0" else "int8"), dt
    return _PLAIN_KINDS.get(dt, "unknown"), dt


def _gptq_or_awq(c: Mapping[str, TensorInfo]) -> str:
    if "g_idx" in c:
        return "gptq"
    # GPTQ packs along the input dim (qweight [in/8, out]); AWQ along the output dim
    # (qweight [in, out/8]). scales are [in/g, out] in both, so the last dims tell them apart.
    q, s = c["qweight"], c.get("scales")
    if s is not None and len(q.shape) >= 2 and len(s.shape) >= 2:
        if q.shape[-1] == s.shape[-1]:
            return "gptq"
        if q.shape[-1] < s.shape[-1]:
            return "awq"
    return "awq"


def _ct_packed(c: Mapping[str, TensorInfo]) -> str:
    dt = c["weight_packed"].dtype
    if dt == "I32":
        return "ct-pack-quantized"
    if dt in ("U8", "I8"):
        if "weight_global_scale" in c:
            return "ct-nvfp4"
        s = c.get("weight_scale")
        if s is not None and s.dtype in _E8M0_LIKE:
            return "mxfp4"
        return "fp4-packed"
    return "unknown"


def _fp8(c: Mapping[str, TensorInfo], hint: str | None) -> str:
    if "weight_scale_inv" in c:
        return "fp8-block"
    s = c.get("weight_scale")
    if s is not None:
        if s.dtype in _E8M0_LIKE:
            return "mxfp8"
        if hint == "compressed-tensors":
            return "ct-fp8"
        if hint is not None:
            return "fp8"
        # ModelOpt and vLLM's fp8 writers store a per-tensor scale as a 0-d tensor;
        # compressed-tensors always keeps a dimension ([1], [out, 1], block grid).
        return "fp8" if s.shape == () else "ct-fp8"
    if "scale" in c:
        return "fp8-dsv4"
    return "fp8"


def _u8(c: Mapping[str, TensorInfo]) -> str:
    s = c.get("weight_scale")
    if s is not None:
        if "weight_scale_2" in c:
            return "modelopt-nvfp4"
        if s.dtype in _E8M0_LIKE:
            return "mxfp4"
        return "fp4-packed"
    bare = c.get("scale")
    if bare is not None and bare.dtype == "F8_E8M0":
        return "fp4-dsv4"
    if bare is not None or "weight_scale_2" in c:
        return "fp4-packed"
    return "unknown"


def _weightless(c: Mapping[str, TensorInfo]) -> tuple[str, str | None]:
    # A scale with no weight beside it means the weight is missing: say so rather than
    # reporting the scale's float dtype as the module's precision.
    if any(leaf in WEIGHT_QUANT_LEAVES for leaf in c):
        return "unknown", None
    biggest = max(c.values(), key=lambda t: t.nbytes, default=None)
    if biggest is None:
        return "unknown", None
    return _PLAIN_KINDS.get(biggest.dtype, "unknown"), biggest.dtype
