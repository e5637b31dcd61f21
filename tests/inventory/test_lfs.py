"""A clone whose shards are Git LFS pointer files: exit 2 naming them, never a header-length error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.core.errors import BadInput
from mtplint.inventory import lfs
from mtplint.inventory.checkpoint import load_inventory
from mtplint.inventory.safetensors_header import read_header

from fixtures.sparse import write_sharded

MTPLINT = [sys.executable, "-m", "mtplint"]
TENSORS = [(f"model.layers.{i}.mlp.weight", "BF16", (8, 8)) for i in range(6)]


def pointer_text(i: int) -> str:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{i:064x}\nsize 4983412736\n"


def clone(tmp_path: Path, shards: int = 3, pointers: int | None = None, origin: str | None = None) -> Path:
    root = tmp_path / "clone"
    names = write_sharded(root, TENSORS, shards)
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    for i, name in enumerate(sorted(names)[: shards if pointers is None else pointers]):
        (root / name).write_text(pointer_text(i))
    if origin is not None:
        (root / ".git").mkdir()
        (root / ".git" / "config").write_text(f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {origin}\n')
    return root


def test_every_shard_a_pointer_names_them_and_the_ways_out(tmp_path):
    root = clone(tmp_path, origin="https://huggingface.co/acme/big-moe")
    with pytest.raises(BadInput) as e:
        load_inventory(root)
    line = e.value.one_line()
    assert "all 3 shards are Git LFS pointer files" in line
    assert "model-00001-of-00003.safetensors" in line
    assert "git lfs pull" in line and "mtplint hf://acme/big-moe" in line
    assert "header length" not in line


def test_some_shards_pointers_says_which(tmp_path):
    root = clone(tmp_path, shards=6, pointers=4)
    with pytest.raises(BadInput) as e:
        load_inventory(root)
    line = e.value.one_line()
    assert "4 of 6 shards are Git LFS pointer files" in line
    assert (
        "model-00001-of-00006.safetensors, model-00002-of-00006.safetensors, model-00003-of-00006.safetensors" in line
    )
    assert "and 1 more" in line
    assert "model-00005" not in line  # a fetched shard is not named
    assert "hf://ORG/NAME" in line  # no hub origin known: the generic form


def test_a_single_pointer_without_index_names_the_file(tmp_path):
    root = tmp_path / "one"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (root / "model.safetensors").write_text(pointer_text(1))
    with pytest.raises(BadInput) as e:
        load_inventory(root)
    assert e.value.path == str(root / "model.safetensors")
    assert "Git LFS pointer file" in str(e.value) and "git lfs pull" in str(e.value)


def test_the_header_reader_itself_recognizes_a_pointer(tmp_path):
    p = tmp_path / "x.safetensors"
    p.write_text(pointer_text(2))
    with pytest.raises(BadInput, match="Git LFS pointer file"):
        read_header(p)


def test_a_credentialed_origin_url_is_never_echoed(tmp_path):
    root = clone(tmp_path, origin="https://user:hf_SECRETSECRET@huggingface.co/acme/big-moe.git")
    with pytest.raises(BadInput) as e:
        load_inventory(root)
    assert "SECRET" not in e.value.one_line()
    assert "hf://acme/big-moe" in e.value.one_line()


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://huggingface.co/acme/m", "acme/m"),
        ("https://hf.co/acme/m.git", "acme/m"),
        ("git@hf.co:acme/m", "acme/m"),
        ("https://github.com/acme/m", None),
        ("https://huggingface.co/datasets/acme/m/extra", None),
    ],
)
def test_hub_repo_of_clone(tmp_path, url, repo):
    root = clone(tmp_path, origin=url)
    assert lfs.hub_repo_of_clone(root) == repo


def test_a_small_real_shard_is_not_a_pointer(tmp_path):
    root = clone(tmp_path, pointers=0)
    assert not any(lfs.is_pointer(p) for p in root.glob("*.safetensors"))
    assert len(load_inventory(root).tensors) == len(TENSORS)


@pytest.mark.slow
def test_cli_exits_2_with_one_line(tmp_path):
    root = clone(tmp_path, shards=3, pointers=1)
    proc = subprocess.run([*MTPLINT, str(root), "-q"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "1 of 3 shards is a Git LFS pointer file, not its content (model-00001-of-00003.safetensors)" in lines[0]
