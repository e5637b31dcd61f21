"""vLLM loads the target before it builds the draft; the probe builds both, then loads both.

`GPUModelRunner.load_model` runs `get_model()` for the target (construction and
`load_weights()`), and only then the proposer's `load_model()`, which constructs the draft. The
draft's VllmConfig keeps the target's `model_config` (vLLM 0.33.0
`SpecDecodeBaseProposer._create_draft_vllm_config` replaces only kernel and attention settings), so
a draft constructor that writes to `vllm_config.model_config.hf_config` writes to the target's
config: `LongCatFlashMTP.__init__` sets `n_routed_experts = None` on it (longcat_flash_mtp.py).
In vLLM the target has loaded by then; the probe loads it after the draft was built, so its
`load_weights()` would read the draft's edit. `TargetConfigState` keeps what the target's configs
held before the draft was built, and puts it back while the target loads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def _configs(vllm_config: Any) -> list[Any]:
    model_config = vllm_config.model_config
    found: list[Any] = []
    for cfg in (getattr(model_config, "hf_config", None), getattr(model_config, "hf_text_config", None)):
        if cfg is not None and hasattr(cfg, "__dict__") and all(cfg is not c for c in found):
            found.append(cfg)
    return found


class TargetConfigState:
    """The attributes of the target's HF configs before the draft is constructed."""

    def __init__(self, vllm_config: Any):
        self._saved = [(cfg, dict(cfg.__dict__)) for cfg in _configs(vllm_config)]

    @contextlib.contextmanager
    def as_before_draft(self) -> Iterator[None]:
        """The configs as the target saw them (while it loads), then as the draft left them."""
        after = [(cfg, dict(cfg.__dict__)) for cfg, _ in self._saved]
        changed = any(cfg.__dict__ != before for cfg, before in self._saved)
        if changed:
            for cfg, before in self._saved:
                cfg.__dict__.clear()
                cfg.__dict__.update(before)
        try:
            yield
        finally:
            if changed:
                for cfg, state in after:
                    cfg.__dict__.clear()
                    cfg.__dict__.update(state)
