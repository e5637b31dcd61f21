"""Issue #37, item 1: every cache is keyed by the bytes of everything the probe reads.

The probe cache (probe.runner.cache_inputs) and the remembered verdict (pipeline.verdict_cache)
both take the files staged into the probe beside config.json by content (probe.staged_files):
the configuration code --trust-remote-code runs and generation_config.json. An edit to any of
them, a same-size edit with its mtime restored included, is a miss. The probe case is the
issue's own: MiMo's configuration code edited to drop the MTP depth must not lint clean from the
cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.config.settings import load_settings
from mtplint.inventory.checkpoint import load_inventory
from mtplint.pipeline import verdict_cache
from mtplint.probe import runner

from fixtures.build import cached_build
from fixtures.sparse import copy_sparse

IDENTITY = {"version": "0.33.0", "commit": "g0", "python": sys.executable}
CODE = "configuration_mimo.py"


def _checkpoint(root: Path) -> Path:
    """config.json (MiMo, auto_map'd configuration code), that code, a generation config and
    one header-only shard."""
    root.mkdir()
    config = {
        "architectures": ["MiMoForCausalLM"],
        "model_type": "mimo",
        "auto_map": {"AutoConfig": "configuration_mimo.MiMoConfig"},
    }
    (root / "config.json").write_text(json.dumps(config))
    (root / CODE).write_text("NUM_NEXTN = 1\n")
    (root / "generation_config.json").write_text(json.dumps({"temperature": 0.6}))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    header += b" " * (-len(header) % 8)
    with (root / "model.safetensors").open("wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + 8)
    return root


def _rewrite_same_size_keeping_mtime(path: Path, old: str, new: str) -> None:
    assert len(old) == len(new)
    st = path.stat()
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def _probe_key(root: Path, trust: bool) -> dict:
    request = runner.ProbeRequest(sm=[9, 0], gpu_name="h100", gpu_memory=80, trust_remote_code=trust)
    return runner.cache_inputs(load_inventory(root), request, IDENTITY)


EDITS = {
    "configuration code": lambda root: (root / CODE).write_text("NUM_NEXTN = 0\n# dropped the MTP depth\n"),
    "configuration code, same size, mtime restored": lambda root: _rewrite_same_size_keeping_mtime(
        root / CODE, "NUM_NEXTN = 1", "NUM_NEXTN = 0"
    ),
    "code a configuration imports": lambda root: (root / "mimo_utils.py").write_text("DEPTH = 0\n"),
    "generation_config.json": lambda root: (root / "generation_config.json").write_text('{"temperature": 1.0}'),
    "generation_config.json, same size, mtime restored": lambda root: _rewrite_same_size_keeping_mtime(
        root / "generation_config.json", "0.6", "0.7"
    ),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edit_to_a_staged_file_changes_the_probe_cache_key(tmp_path, edit):
    root = _checkpoint(tmp_path / "ckpt")
    before = _probe_key(root, trust=True)
    assert _probe_key(root, trust=True) == before
    EDITS[edit](root)
    assert _probe_key(root, trust=True) != before


# (The verdict cache stamped Python files by name, size and mtime: the edits those stamps miss.)
@pytest.mark.parametrize("edit", [e for e in EDITS if "same size" in e or e.startswith("generation")])
def test_an_edit_to_a_staged_file_renames_the_remembered_verdict(tmp_path, edit):
    root = _checkpoint(tmp_path / "ckpt")
    settings = load_settings(root, {"trust_remote_code": True}).lint
    before = verdict_cache.pre_inputs(root, settings, [])
    assert before is not None and verdict_cache.pre_inputs(root, settings, []) == before
    EDITS[edit](root)
    assert verdict_cache.pre_inputs(root, settings, []) != before


def test_every_file_staged_into_the_probe_is_in_the_key(tmp_path):
    """What _stage copies beside config.json is exactly what the key digests (shard headers
    aside: the inventory keys them), so a file added to the staging cannot be left out."""
    root = _checkpoint(tmp_path / "ckpt")
    (root / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    (root / "mimo_utils.py").write_text("DEPTH = 1\n")
    inventory = load_inventory(root)
    staged_dir, _tensors = runner._stage(inventory, tmp_path, "", trust_remote_code=True)
    staged = {p.name for p in staged_dir.iterdir()} - {"config.json", "model.safetensors"}
    key = _probe_key(root, trust=True)["target"]["staged"]
    assert set(key) == staged == {"hf_quant_config.json", "generation_config.json", CODE, "mimo_utils.py"}


# -- the reproduction, through the real probe ----------------------------------------------


def _lint(ckpt: Path, cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MTPLINT_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-m", "mtplint", str(ckpt), "--trust-remote-code", "-q", "--format", "json", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


@pytest.mark.probe
@pytest.mark.slow
def test_configuration_code_that_drops_the_mtp_depth_is_not_served_from_a_cache(tmp_path):
    ckpt = tmp_path / "mimo"
    shutil.copytree(cached_build("mimo-bf16"), ckpt, copy_function=copy_sparse)  # 15 GB of zeros otherwise
    cache = tmp_path / "cache"
    assert _lint(ckpt, cache).returncode == 0
    # The depth vLLM reads (num_nextn_predict_layers) forced to 0 by the configuration code.
    code = ckpt / CODE
    text = code.read_text()
    old = "self.num_nextn_predict_layers = num_nextn_predict_layers"
    assert old in text
    code.write_text(text.replace(old, "self.num_nextn_predict_layers = 0"))
    uncached = _lint(ckpt, tmp_path / "fresh", "--no-cache")
    assert uncached.returncode == 1, uncached.stderr
    again = _lint(ckpt, cache)
    assert again.returncode == 1, again.stderr
    codes = lambda proc: sorted({f["code"] for f in json.loads(proc.stdout)["findings"]})  # noqa: E731
    assert codes(again) == codes(uncached)
