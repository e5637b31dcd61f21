"""Patch `dsv4-o-proj-bf16-fallback`: let DeepSeek-V4's NVIDIA O projection run a `wo_a`
that has no FP8 scale (a BF16 MTP block left unquantized by its exporter).

vLLM 0.23-0.29 always take the FP8 path in `deep_gemm_fp8_o_proj`: they read
`wo_a.weight_scale` / `wo_a.weight_scale_inv`, which an unquantized `wo_a` does not have,
so the first forward raises AttributeError. vLLM 0.30.0 picks the path by the weight's
dtype; this mirrors that and PR #44847: inverse RoPE in higher precision, the grouped
`wo_a` matmul in BF16, then `wo_b`. The FP8 path is untouched whenever a scale exists.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any

import torch

OPS_MODULE = "vllm.models.deepseek_v4.nvidia.ops.o_proj"
FUNCTION = "deep_gemm_fp8_o_proj"


def fp8_weight_scale(wo_a: torch.nn.Module) -> torch.Tensor | None:
    for name in ("weight_scale", "weight_scale_inv"):
        if hasattr(wo_a, name):
            return getattr(wo_a, name)
    return None


def inverse_rope(
    o: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor, *, nope_dim: int, rope_dim: int
) -> torch.Tensor:
    """Undo the interleaved (GPT-J) rotary embedding on the last `rope_dim` dims of each
    head, as vLLM's fused_inv_rope_fp8_quant kernel does: pairs (2i, 2i+1) rotate by the
    angle whose cos/sin are entries i and rope_dim/2 + i of the position's cache row."""
    half = rope_dim // 2
    cache = cos_sin_cache.index_select(0, positions.long()).float()
    cos, sin = cache[:, None, :half], cache[:, None, half : 2 * half]
    rope = o[..., nope_dim : nope_dim + rope_dim].float()
    even, odd = rope[..., 0::2], rope[..., 1::2]
    rotated = torch.stack((even * cos + odd * sin, odd * cos - even * sin), dim=-1).flatten(-2)
    return torch.cat((o[..., :nope_dim], rotated.to(o.dtype)), dim=-1)


def bf16_o_proj(
    o: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    wo_a: Any,  # vLLM's linear layer: its weight is a Tensor, which nn.Module's typing cannot say
    wo_b: Any,
    *,
    n_groups: int,
    heads_per_group: int,
    nope_dim: int,
    rope_dim: int,
    o_lora_rank: int,
    **_: Any,
) -> torch.Tensor:
    """The O projection for an unquantized `wo_a` ([n_groups * o_lora_rank, heads_per_group
    * head_dim], rows grouped by output group)."""
    tokens = o.shape[0]
    x = inverse_rope(o, positions, cos_sin_cache, nope_dim=nope_dim, rope_dim=rope_dim)
    x = x.reshape(tokens, n_groups, heads_per_group * o.shape[-1]).to(torch.bfloat16)
    weight = wo_a.weight.view(n_groups, o_lora_rank, -1).to(torch.bfloat16)
    z = torch.einsum("tgi,gri->tgr", x, weight)
    return wo_b(z.flatten(1))


def _fallback(original: Any) -> Any:
    @functools.wraps(original)
    def deep_gemm_fp8_o_proj(o, positions, cos_sin_cache, wo_a, wo_b, **kwargs):
        if fp8_weight_scale(wo_a) is None:
            return bf16_o_proj(o, positions, cos_sin_cache, wo_a, wo_b, **kwargs)
        return original(o, positions, cos_sin_cache, wo_a, wo_b, **kwargs)

    deep_gemm_fp8_o_proj._mtplint_original = original  # type: ignore[attr-defined]
    return deep_gemm_fp8_o_proj


def apply() -> dict[str, Any]:
    try:
        ops = importlib.import_module(OPS_MODULE)
    except ImportError as exc:
        raise RuntimeError(f"this vLLM has no {OPS_MODULE} ({exc})") from exc
    current = getattr(ops, FUNCTION, None)
    if current is None:
        raise RuntimeError(f"this vLLM's {OPS_MODULE} has no {FUNCTION}")
    original = getattr(current, "_mtplint_original", current)
    patched = current if original is not current else _fallback(original)
    # The attention backends (flashmla, flashinfer_sparse) bind the function by name when
    # they are imported: those imported later pick up the patched attribute, those already
    # imported are rebound here.
    rebound = []
    for name, module in list(sys.modules.items()):
        if name.startswith("vllm.models.deepseek_v4") and getattr(module, FUNCTION, None) in (original, patched):
            setattr(module, FUNCTION, patched)
            rebound.append(name)
    return {"status": "applied", "replaced": [f"{OPS_MODULE}:{FUNCTION}"], "rebound_in": rebound}
