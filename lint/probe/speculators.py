"""The draft VllmConfig of speculators that build their draft outside the V1 proposer.

DSpark is implemented only by vLLM's V2 GPU model runner (0.33.0 config/vllm.py), whose
`load_dspark_model` (v1/worker/gpu/spec_decode/dspark/utils.py) builds the draft with
`get_draft_quant_config(vllm_config)`: a quant config made from the draft's ModelConfig
(for an embedded DSpark drafter, the target's checkpoint and quantization method), set on the
draft's VllmConfig after its post-init restored the target's. The probe builds it the same
way, calling vLLM's own helper, so the config class the drafter is built with is the
release's (the family FP8 config, or whatever that release resolves).
"""

from __future__ import annotations

import copy
from typing import Any


def draft_vllm_config(vllm_config: Any, spec_config: Any, proposer_config: Any) -> Any:
    """The VllmConfig the draft is built with: the proposer's (construct.draft_config_for),
    with the quant config the release's speculator gives the draft where it sets one."""
    if getattr(spec_config, "method", None) != "dspark":
        return proposer_config
    try:
        from vllm.model_executor.models.utils import get_draft_quant_config
    except ImportError:  # a release without it builds the draft with the target's config
        return proposer_config
    out = copy.copy(proposer_config)
    out.quant_config = get_draft_quant_config(vllm_config)
    return out
