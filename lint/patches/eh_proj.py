"""Patch `mtp-quant-aware-eh-proj`: build the DeepSeek/GLM MTP `eh_proj` as a quantization
-aware ReplicatedLinear when the checkpoint stores it quantized.

vLLM builds `eh_proj` as a plain `nn.Linear(2h, h)`, which never gets a quant method: a
packed NVFP4/MXFP4 `eh_proj` fails with a shape mismatch and its scales have no slot
(vLLM #35031/#48492). Mirrors vLLM PR #48506, guarded on the on-disk format so that the
official BF16 `eh_proj` (undeclared in DeepSeek's FP8 configs) keeps its nn.Linear.
"""

from __future__ import annotations

import functools
from typing import Any

from .constructors import wrap_constructors
from .ondisk import module_quantized

TARGETS = (
    ("vllm.model_executor.models.glm4_moe_mtp", "Glm4MoeMultiTokenPredictorLayer"),
    ("vllm.model_executor.models.deepseek_mtp", "DeepSeekMultiTokenPredictorLayer"),
)


def _wrap(cls: Any) -> None:
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        from vllm.config import get_current_vllm_config
        from vllm.model_executor.layers.linear import ReplicatedLinear

        vllm_config = get_current_vllm_config()
        prefix = kwargs.get("prefix", args[1] if len(args) > 1 else "")
        quant_config = vllm_config.quant_config
        model_config = (
            vllm_config.speculative_config.draft_model_config
            if vllm_config.speculative_config
            else vllm_config.model_config
        )
        if quant_config is None or not module_quantized(str(model_config.model), model_config.hf_config, ".eh_proj"):
            return
        linear = self.eh_proj
        self.eh_proj = ReplicatedLinear(
            linear.in_features,
            linear.out_features,
            bias=False,
            quant_config=quant_config,
            prefix=f"{prefix}.eh_proj",
            return_bias=False,
        )

    cls.__init__ = __init__


def apply() -> dict[str, Any]:
    return {"status": "applied", "classes": wrap_constructors(TARGETS, "_mtplint_eh_proj", _wrap)}
