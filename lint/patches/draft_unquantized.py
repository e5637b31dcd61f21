"""Patch `draft-unquantized-mtp-block`: build the MTP draft unquantized when its block is
unquantized on disk, instead of inheriting the target's quantization scheme.

Mirrors the upstream proposals for vLLM #43893/#43319 (and the per-model `fc_quant=None`
fixes #38832, #46316): when every MTP tensor on disk is a plain 16-bit weight, the draft's
quant config answers "unquantized" for every layer the draft constructs.
"""

from __future__ import annotations

import functools
from typing import Any

from .ondisk import mtp_block_unquantized

_APPLIED = False


def _is_mtp_draft(model_config: Any) -> bool:
    archs = getattr(model_config, "architectures", None) or []
    return any("MTP" in a or "Mtp" in a for a in archs)


def _unquantized(layer: Any, prefix: str) -> Any:
    from vllm.model_executor.layers.linear import LinearBase, UnquantizedLinearMethod
    from vllm.model_executor.layers.vocab_parallel_embedding import (
        UnquantizedEmbeddingMethod,
        VocabParallelEmbedding,
    )

    if isinstance(layer, LinearBase):
        return UnquantizedLinearMethod()
    if isinstance(layer, VocabParallelEmbedding):
        return UnquantizedEmbeddingMethod()
    return None  # FusedMoE and others fall back to their unquantized method


def apply() -> dict[str, Any]:
    global _APPLIED
    import vllm.model_executor.model_loader.utils as utils

    modules: list[Any] = [utils]  # each one's initialize_model is replaced below
    try:
        import vllm.model_executor.model_loader.base_loader as base_loader

        modules.append(base_loader)
    except ImportError:
        pass
    if _APPLIED:
        return {"status": "already applied"}
    original = utils.initialize_model

    @functools.wraps(original)
    def initialize_model(vllm_config: Any, *args: Any, **kwargs: Any) -> Any:
        model_config = kwargs.get("model_config")
        qc = vllm_config.quant_config
        if (
            model_config is None
            or qc is None
            or not _is_mtp_draft(model_config)
            or not mtp_block_unquantized(str(model_config.model), model_config.hf_config)
        ):
            return original(vllm_config, *args, **kwargs)
        inner = qc.get_quant_method
        qc.get_quant_method = _unquantized  # every draft layer: what quant_config=None gives
        try:
            return original(vllm_config, *args, **kwargs)
        finally:
            qc.get_quant_method = inner

    initialize_model._mtplint_draft_unquantized = True  # type: ignore[attr-defined]
    for mod in modules:
        if getattr(mod, "initialize_model", None) is original:
            mod.initialize_model = initialize_model
    _APPLIED = True
    return {"status": "applied", "hooked": [m.__name__ for m in modules]}
