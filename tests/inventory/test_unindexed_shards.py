"""Shards the index never names (a sidecar mtp.safetensors): recorded by the inventory with their
tensors, kept by the memo, reported by MTP015, and added to the index by index-unindexed-shards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.checks.context import Context
from mtplint.checks.index_coverage import shards_outside_the_index
from mtplint.core.findings import Finding, Fixes, Location
from mtplint.fixer import index_shards
from mtplint.fixer.plan import render
from mtplint.inventory import checkpoint
from mtplint.inventory.checkpoint import load_inventory

from fixtures.build import cached_build
from fixtures.sparse import write_sharded, write_sparse

# A finding selects the fixes that act on it by recommending them.
RECOMMENDS_FIX = Fixes(artifact=[index_shards.ID])

MTPLINT = [sys.executable, "-m", "mtplint"]
TRUNK = [(f"model.layers.{i}.mlp.down_proj.weight", "BF16", (16, 16)) for i in range(2)]
SIDECAR = [("model.layers.2.eh_proj.weight", "BF16", (16, 32)), ("model.layers.2.enorm.weight", "BF16", (16,))]


def make(tmp_path: Path, sidecar_index: bool = True) -> Path:
    root = tmp_path / "ckpt"
    write_sharded(root, TRUNK, 2)
    (root / "config.json").write_text(
        json.dumps({"model_type": "glm4_moe", "num_hidden_layers": 2, "num_nextn_predict_layers": 1})
    )
    write_sparse(root / "mtp.safetensors", SIDECAR)
    if sidecar_index:
        (root / "mtp.safetensors.index.json").write_text(
            json.dumps({"weight_map": {n: "mtp.safetensors" for n, _, _ in SIDECAR}})
        )
    return root


def test_inventory_records_unindexed_shards_and_other_indexes(tmp_path):
    inv = load_inventory(make(tmp_path))
    assert sorted(inv.tensors) == [n for n, _, _ in TRUNK]  # what vLLM loads
    assert {t.name for t in inv.unindexed["mtp.safetensors"]} == {n for n, _, _ in SIDECAR}
    assert all(t.file == "mtp.safetensors" for t in inv.unindexed["mtp.safetensors"])
    assert inv.other_indexes == ["mtp.safetensors.index.json"]


def test_an_unreadable_unindexed_shard_is_recorded_not_fatal(tmp_path):
    root = make(tmp_path)
    (root / "junk.safetensors").write_bytes(b"\x01" * 12)
    inv = load_inventory(root)
    assert inv.unindexed["junk.safetensors"] is None
    hits = shards_outside_the_index(Context(inv, None, {}), None)  # type: ignore[arg-type]
    junk = next(h for h in hits if h.key == "junk.safetensors")
    assert junk.artifact_fixes == [] and junk.severity == "warning"


def test_without_an_index_every_shard_loads(tmp_path):
    root = tmp_path / "one"
    root.mkdir()
    write_sparse(root / "model.safetensors", TRUNK)
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    write_sparse(root / "mtp.safetensors", SIDECAR)
    inv = load_inventory(root)
    assert inv.unindexed == {} and "model.layers.2.eh_proj.weight" in inv.tensors


def test_the_memo_keeps_unindexed_shards(tmp_path, monkeypatch):
    root = make(tmp_path)
    first = load_inventory(root)
    monkeypatch.setattr(checkpoint, "_read_layout", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-read")))
    second = load_inventory(root)
    assert second.unindexed == first.unindexed and second.other_indexes == first.other_indexes


def test_a_new_sidecar_index_misses_the_memo(tmp_path):
    root = make(tmp_path, sidecar_index=False)
    assert load_inventory(root).other_indexes == []
    (root / "mtp.safetensors.index.json").write_text("{}")
    assert load_inventory(root).other_indexes == ["mtp.safetensors.index.json"]


def test_check_hits_once_per_shard_and_stands_for_the_missing_mtp_layer(tmp_path):
    inv = load_inventory(make(tmp_path))
    (hit,) = shards_outside_the_index(Context(inv, None, {}), None)  # type: ignore[arg-type]
    assert hit.key == "mtp.safetensors" and hit.location.file == "mtp.safetensors"
    assert hit.fields["mtp_count"] == 2 and hit.fields["example"] == "model.layers.2.eh_proj.weight"
    assert "mtp.safetensors.index.json" in hit.fields["index_note"]
    assert [c.label for c in hit.provides] == ["mtp-missing"] and hit.severity is None


def test_fix_adds_the_sidecar_tensors_to_the_weight_map(tmp_path):
    root = make(tmp_path)
    inv = load_inventory(root)
    before = json.loads((root / "model.safetensors.index.json").read_text())
    finding = Finding(
        "MTP015", "shards-outside-the-index", "error", "", Location(file="mtp.safetensors"), fixes=RECOMMENDS_FIX
    )
    changes = index_shards.plan(inv, None, [finding])  # type: ignore[arg-type]
    (_, new), *_ = render(root, changes).json.values()
    after = json.loads(new)
    assert after["weight_map"] == {**before["weight_map"], **{n: "mtp.safetensors" for n, _, _ in SIDECAR}}
    added = sum(t.nbytes for t in inv.unindexed["mtp.safetensors"])
    assert after["metadata"]["total_size"] == before["metadata"]["total_size"] + added


def test_fix_leaves_names_the_index_already_has(tmp_path):
    root = make(tmp_path)
    write_sparse(root / "dup.safetensors", [TRUNK[0]])
    inv = load_inventory(root)
    findings = [
        Finding("MTP015", "shards-outside-the-index", "error", "", Location(file=f), fixes=RECOMMENDS_FIX)
        for f in ("dup.safetensors", "mtp.safetensors")
    ]
    (change,) = index_shards.plan(inv, None, findings)  # type: ignore[arg-type]
    assert any("already named elsewhere" in n for n in change.notes)
    (_, new), *_ = render(root, [change]).json.values()
    assert json.loads(new)["weight_map"][TRUNK[0][0]] != "dup.safetensors"


@pytest.mark.probe
def test_cli_fix_makes_the_sidecar_load(tmp_path):
    root = tmp_path / "ckpt"
    # Sparse: the shards are ~100 GB logical with a few MB on disk; a plain copy would fill the disk.
    subprocess.run(
        ["cp", "-r", "--sparse=always", str(cached_build("glm45-air-nvfp4-mtp-sidecar")), str(root)], check=True
    )
    proc = subprocess.run([*MTPLINT, "fix", str(root), "-q"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "index-unindexed-shards" in proc.stdout and "re-lint: 0 error(s)" in proc.stdout
    wm = json.loads((root / "model.safetensors.index.json").read_text())["weight_map"]
    assert wm["model.layers.46.eh_proj.weight"] == "mtp.safetensors"
