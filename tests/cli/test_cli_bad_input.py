"""Bad input: one line naming the file and the problem, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from fixtures.sparse import write_sparse

MTPLINT = [sys.executable, "-m", "mtplint"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*MTPLINT, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def assert_bad_input(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    for n in needles:
        assert n in line, line


def checkpoint(tmp_path: Path, config: str | None = '{"model_type": "llama"}') -> Path:
    d = tmp_path / "ckpt"
    d.mkdir()
    if config is not None:
        (d / "config.json").write_text(config)
    return d


def test_missing_directory(tmp_path):
    assert_bad_input(run(str(tmp_path / "nope")), "nope")


def test_no_config(tmp_path):
    d = checkpoint(tmp_path, config=None)
    write_sparse(d / "model.safetensors", [("w", "BF16", (4, 4))])
    assert_bad_input(run(str(d)), "config.json")


def test_invalid_config_json(tmp_path):
    d = checkpoint(tmp_path, config='{"model_type": ')
    write_sparse(d / "model.safetensors", [("w", "BF16", (4, 4))])
    assert_bad_input(run(str(d)), "config.json", "line 1")


def test_truncated_header(tmp_path):
    d = checkpoint(tmp_path)
    (d / "model.safetensors").write_bytes((1000).to_bytes(8, "little") + b'{"w": ')
    assert_bad_input(run(str(d)), "model.safetensors")


def test_not_safetensors(tmp_path):
    d = checkpoint(tmp_path)
    (d / "model.safetensors").write_bytes(b"PK\x03\x04 this is a zip file, not safetensors")
    assert_bad_input(run(str(d)), "model.safetensors")


def test_index_names_missing_shard(tmp_path):
    d = checkpoint(tmp_path)
    write_sparse(d / "model-00001-of-00002.safetensors", [("a", "BF16", (4, 4))])
    (d / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "metadata": {},
                "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"},
            }
        )
    )
    assert_bad_input(run(str(d)), "model-00002-of-00002.safetensors")


def test_unknown_gpu_is_usage_error(tmp_path):
    d = checkpoint(tmp_path)
    write_sparse(d / "model.safetensors", [("w", "BF16", (4, 4))])
    assert_bad_input(run(str(d), "--gpu", "voodoo5"), "voodoo5")


def test_click_usage_errors_exit_2(tmp_path):
    proc = run(str(tmp_path), "--num-speculative-tokens", "zero")
    assert proc.returncode == 2
    proc = run(str(tmp_path), "--no-such-flag")
    assert proc.returncode == 2


@pytest.mark.probe
def test_vllm_commit_mismatch(tmp_path):
    d = checkpoint(tmp_path)
    write_sparse(d / "model.safetensors", [("w", "BF16", (4, 4))])
    proc = run(str(d), "--vllm-commit", "0.1.2")
    assert_bad_input(proc, "--vllm-commit 0.1.2", "older than 0.10.1, the oldest release mtplint supports")


@pytest.mark.parametrize("code", ["MTP002", "mtp002"])
def test_rule_explains_itself(code):
    proc = run("rule", code)
    assert proc.returncode == 0, proc.stderr
    assert "MTP002" in proc.stdout and "## Why it breaks" in proc.stdout and "## Fix" in proc.stdout


def test_unknown_rule_exit_2():
    assert run("rule", "MTP999").returncode == 2


def test_rules_lists_every_rule_file():
    proc = run("rules")
    assert proc.returncode == 0
    codes = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    shipped = {p.stem for p in (ROOT / "rules").glob("MTP*.toml")}
    assert codes == shipped and shipped


def test_unknown_option_in_mtplint_toml(tmp_path):
    d = checkpoint(tmp_path)
    write_sparse(d / "model.safetensors", [("w", "BF16", (4, 4))])
    (d / "mtplint.toml").write_text("num-speculative-token = 2\n")
    assert_bad_input(run(str(d)), "mtplint.toml", "num-speculative-token")


def test_unknown_patch_id(tmp_path):
    d = checkpoint(tmp_path)
    write_sparse(d / "model.safetensors", [("w", "BF16", (4, 4))])
    assert_bad_input(run(str(d), "--with-patches", "no-such-patch"), "no-such-patch")


@pytest.mark.probe
def test_probe_timeout_is_exit_3_without_traceback(tmp_path):
    from fixtures.build import cached_build

    env_cache = tmp_path / "cache"
    proc = subprocess.run(
        [*MTPLINT, str(cached_build("glm45-air-nvfp4-clean")), "--probe-timeout", "1", "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "MTPLINT_CACHE_DIR": str(env_cache)},
    )
    assert proc.returncode == 3, proc.stderr
    assert "did not finish within 1 s" in proc.stderr
    assert "Traceback" not in proc.stderr.splitlines()[0]


@pytest.mark.probe
def test_vllm_python_without_vllm_is_bad_input(tmp_path):
    d = checkpoint(tmp_path)
    write_sparse(d / "model.safetensors", [("w", "BF16", (4, 4))])
    import shutil

    bare = shutil.which("python3.11") or "/usr/bin/python3"
    assert_bad_input(run(str(d), "--vllm-python", bare), "no vLLM is installed")


@pytest.mark.probe
def test_custom_config_code_needs_trust_remote_code(tmp_path):
    from fixtures.build import cached_build

    proc = subprocess.run(
        [*MTPLINT, str(cached_build("mimo-bf16")), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "MTPLINT_CACHE_DIR": str(tmp_path / "c")},
    )
    assert_bad_input(proc, "--trust-remote-code")


@pytest.mark.probe
def test_probe_crash_is_one_line_naming_the_exception(tmp_path):
    """A probed vLLM that cannot import (here vLLM 0.20.2's real code without `gguf`, which
    it imports and the pinned vLLM does not): exit 3, one line, no traceback."""
    import os

    from recorded_cases import release_env

    from fixtures.build import cached_build

    release = release_env("0.20.2") / "site" / "vllm"
    site = tmp_path / "site"
    site.mkdir()
    (site / "vllm").symlink_to(release, target_is_directory=True)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    proc = subprocess.run(
        [*MTPLINT, str(cached_build("dsv4-flash-official")), "--vllm-python", str(python), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MTPLINT_CACHE_DIR": str(tmp_path / "c")},
    )
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "ModuleNotFoundError: No module named 'gguf'" in lines[0]
    assert "gguf_utils.py:" in lines[0] and "rerun with --debug" in lines[0]


def test_mlx_checkpoint_is_one_line_exit_2(tmp_path):
    """mlx-lm's config (`quantization` and its twin `quantization_config`, {group_size, bits,
    mode}, no quant_method) over its packed layout (U32 weight, scales, biases): no vLLM
    quantization method reads it. Before, the probe built every layer unquantized and the lint
    listed each load error (an mlx-lm Qwen3-Next with its MTP block: 30 findings, 21 load
    errors); now one line, exit 2, before any probe."""
    q = {"group_size": 64, "bits": 4, "mode": "affine"}
    d = checkpoint(tmp_path, json.dumps({"model_type": "qwen3_next", "quantization": q, "quantization_config": q}))
    write_sparse(
        d / "model.safetensors",
        [("mtp.fc.weight", "U32", (64, 16)), ("mtp.fc.scales", "BF16", (64, 2)), ("mtp.fc.biases", "BF16", (64, 2))],
    )
    assert_bad_input(run(str(d), "--no-cache"), "config.json", "MLX (mlx-lm) checkpoint: vLLM has no loader")
