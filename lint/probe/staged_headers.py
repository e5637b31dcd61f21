"""Header-only safetensors shards beside the staged config.json.

vLLM reads the checkpoint's own safetensors headers while it creates its engine
configuration, before any model is built: AWQ and GPTQ fill their skip lists from the
dtypes stored on disk (`maybe_update_config`: AWQ adds every module stored unquantized to
`modules_to_not_convert`, GPTQ lists the quantized ones in `modules_in_block_to_quantize`),
`ModelConfig` unties tied embeddings when the checkpoint stores an `lm_head`
(`maybe_untie_word_embeddings`) and infers a missing dtype from the stored ones. Each shard
is staged as its header alone (no data: vLLM's readers parse only the 8-byte length and
the JSON header), so those steps run in the probe on the checkpoint's real names and dtypes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from ..inventory.model import Inventory, TensorInfo


def stage(inventory: Inventory, config_dir: Path) -> int:
    """Write one header-only file per shard vLLM's directory scan would read; how many."""
    by_shard: dict[str, list[TensorInfo]] = {}
    for t in inventory.tensors.values():
        by_shard.setdefault(t.file, []).append(t)
    for shard, held in inventory.unindexed.items():
        # vLLM globs every *.safetensors in the directory: a sidecar the index never names too.
        if held is not None:
            by_shard.setdefault(shard, []).extend(held)
    written = 0
    for shard, tensors in by_shard.items():
        if "/" in shard or not shard.endswith(".safetensors"):
            continue  # vLLM's scan globs the top level only
        (config_dir / shard).write_bytes(_header_bytes(tensors))
        written += 1
    return written


def _header_bytes(tensors: list[TensorInfo]) -> bytes:
    base = min((t.begin for t in tensors), default=0)  # offsets count from the data section
    header = {
        t.name: {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [t.begin - base, t.end - base]}
        for t in sorted(tensors, key=lambda t: t.begin)
    }
    body = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(body)) + body
