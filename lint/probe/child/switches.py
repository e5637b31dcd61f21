"""The deployment's switches a forward-pass defect depends on, as the probed vLLM read them
from the command (its own parser and config classes): whether the server runs eager and which
attention backend it was told to use. Known-defect rows (MTP030) name the switches that avoid
them; the probe never runs a forward pass, so it only reports what was asked for."""

from __future__ import annotations

import os
from typing import Any


def read(vllm_config: Any) -> dict[str, str]:
    """Only the switches set away from vLLM's defaults: a default deployment's report has none."""
    out: dict[str, str] = {}
    if getattr(getattr(vllm_config, "model_config", None), "enforce_eager", False):
        out["enforce_eager"] = "true"
    # `--attention-backend` (AttentionConfig.backend); releases before it read the variable.
    backend = getattr(getattr(vllm_config, "attention_config", None), "backend", None)
    backend = backend or os.environ.get("VLLM_ATTENTION_BACKEND")
    if backend:
        out["attention_backend"] = str(getattr(backend, "name", backend))
    return out
