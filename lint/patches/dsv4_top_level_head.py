"""Patch `dsv4-mtp-route-top-level-head`: route top-level `head.weight` / `embed.weight`
into every DeepSeek-V4 MTP layer.

Checkpoints written by `transformers.save_pretrained` keep the shared head and embedding
only at the top level; `DeepSeekV4MTP.load_weights` skips names without an `mtp.{i}.`
prefix, so the draft's copies stay uninitialized unless the proposer shares them. vLLM
0.26+ shares both at PP=1, but not the embedding under pipeline parallelism (and older
vLLM shared neither `shared_head.head`). Mirrors the loader fix proposed in vLLM #43459.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_ALIASES = {"head.weight": "mtp.{i}.head.weight", "embed.weight": "mtp.{i}.emb.tok_emb.weight"}


def apply() -> dict[str, Any]:
    try:
        from vllm.models.deepseek_v4.nvidia.mtp import DeepSeekV4MTP
    except ImportError as exc:
        raise RuntimeError(f"this vLLM has no DeepSeek-V4 MTP draft ({exc}); the patch does not apply") from None
    if getattr(DeepSeekV4MTP.load_weights, "_mtplint_routed", False):
        return {"status": "already applied"}
    original = DeepSeekV4MTP.load_weights

    def load_weights(self: Any, weights: Iterable[tuple[str, Any]]) -> Any:
        depth = int(getattr(self.config, "num_nextn_predict_layers", 1) or 1)

        def routed() -> Iterable[tuple[str, Any]]:
            for name, tensor in weights:
                alias = _ALIASES.get(name)
                if alias is None:
                    yield name, tensor
                    continue
                for i in range(depth):
                    yield alias.format(i=i), tensor

        return original(self, routed())

    load_weights._mtplint_routed = True  # type: ignore[attr-defined]
    DeepSeekV4MTP.load_weights = load_weights  # type: ignore[method-assign]  # the patch: vLLM's class, wrapped
    return {"status": "applied", "class": "vllm.models.deepseek_v4.nvidia.mtp.DeepSeekV4MTP"}
