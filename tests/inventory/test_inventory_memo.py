"""The inventory memo: a repeat read of an unchanged checkpoint skips the headers; any
change to a shard, the index or a config file reads them again."""

from __future__ import annotations

import json
import os

from mtplint.inventory import checkpoint, memo

from fixtures.sparse import write_sharded


def make(tmp_path):
    root = tmp_path / "ckpt"
    write_sharded(
        root, [("a.weight", "BF16", (8, 8)), ("b.weight", "F8_E4M3", (8, 8)), ("b.weight_scale_inv", "F32", (1, 1))], 2
    )
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return root


def test_second_read_comes_from_the_memo_and_is_identical(tmp_path, monkeypatch):
    root = make(tmp_path)
    first = checkpoint.load_inventory(root)
    monkeypatch.setattr(checkpoint, "_read_layout", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-read")))
    second = checkpoint.load_inventory(root)
    assert second.tensors == first.tensors
    assert second.modules == first.modules
    assert (second.digest, second.shards, second.index_path) == (first.digest, first.shards, first.index_path)


def test_a_changed_shard_is_read_again(tmp_path):
    root = make(tmp_path)
    checkpoint.load_inventory(root)
    sig = memo.signature(root)
    shard = next(root.glob("*.safetensors"))
    st = shard.stat()
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert memo.signature(root) != sig
    # A truncated shard must be reported, not served from the memo.
    with open(shard, "r+b") as f:
        f.truncate(20)
    import pytest
    from mtplint.core.errors import BadInput

    with pytest.raises(BadInput):
        checkpoint.load_inventory(root)
