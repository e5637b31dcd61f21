"""`--vllm-source PATH --vllm-commit X`: a commit of a local vLLM git checkout, probed as its
Python tree at that commit (lint/envs/source.py). The checkout here is built from two
releases' Python trees as two commits, stripped of what vLLM's .gitignore keeps out of git
(the setuptools-scm version file, the built vllm_flash_attn package, the vendored kernel
packages CMake copies, native extensions), so each tree imports as a real checkout would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from recorded_cases import release_env

from fixtures.build import cached_build

pytestmark = pytest.mark.probe
MTPLINT = [sys.executable, "-m", "mtplint"]

# What a checkout lacks that a wheel ships (vLLM's .gitignore; CMake install targets).
NOT_IN_GIT = ("_version.py", "vllm_flash_attn", "deep_gemm", "triton_kernels", "fmha_sm100", "tml_fa4", "__pycache__")


def _git(repo: Path, *args: str) -> str:
    env = dict(
        os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"
    )
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def _commit_tree(repo: Path, tree: Path, version: str) -> str:
    shutil.rmtree(repo / "vllm", ignore_errors=True)
    shutil.copytree(tree, repo / "vllm", ignore=shutil.ignore_patterns(*NOT_IN_GIT, "*.so", "*.pyc"))
    _git(repo, "add", "-A", "vllm")
    _git(repo, "commit", "-q", "-m", f"vLLM {version}'s Python tree")
    _git(repo, "tag", f"v{version}")
    return _git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> tuple[Path, str, str]:
    import importlib.util

    repo = tmp_path_factory.mktemp("vllm-checkout")
    _git(repo, "init", "-q")
    old = _commit_tree(repo, release_env("0.29.0") / "site" / "vllm", "0.29.0")
    new = _commit_tree(repo, Path(importlib.util.find_spec("vllm").origin).parent, "0.33.0")
    assert not (repo / "vllm" / "_version.py").exists() and not (repo / "vllm" / "vllm_flash_attn").exists()
    return repo, old, new


def _lint(repo: Path, commit: str, envs: Path) -> tuple[int, dict, str]:
    ckpt = str(cached_build("dsv4-flash-w4a16-bf16mtp-fixed"))
    proc = subprocess.run(
        [
            *MTPLINT,
            ckpt,
            "--kv-cache-dtype",
            "fp8",
            "--vllm-source",
            str(repo),
            "--vllm-commit",
            commit[:9],
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, MTPLINT_ENVS_DIR=str(envs)),
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_each_commit_lints_with_its_own_verdict(checkout, tmp_path):
    """Seed 000 after its artifact fix: MTP010 on the 0.29.0 tree, clean on the 0.33.0 tree."""
    repo, old, new = checkout
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "0.29.0").symlink_to(release_env("0.29.0"))  # the nearest release, at hand
    rc, report, stderr = _lint(repo, old, envs)
    assert {k: report["vllm"][k] for k in ("version", "commit")} == {"version": "0.29.0", "commit": "g" + old[:9]}
    assert "MTP010" in {f["code"] for f in report["findings"]}, [f["code"] for f in report["findings"]]
    assert rc == 1 and f"at {old[:12]}" in stderr  # provisioning is announced on first use
    rc, report, stderr = _lint(repo, new, envs)
    assert {k: report["vllm"][k] for k in ("version", "commit")} == {"version": "0.33.0", "commit": "g" + new[:9]}
    assert [f["code"] for f in report["findings"] if f["severity"] == "error"] == []
    assert rc == 0
    record = json.loads((envs / new[:12] / "env.json").read_text())
    assert record["kind"] == "source" and record["commit"] == new
    assert "vllm.vllm_flash_attn" in record["build_outputs_copied"]["modules"]  # as VLLM_USE_PRECOMPILED=1
    _, _, again = _lint(repo, new, envs)
    assert "provisioning" not in again  # cached by commit


def test_unknown_commit_in_the_checkout_is_bad_input(checkout, tmp_path):
    repo, _, _ = checkout
    ckpt = str(cached_build("dsv4-flash-w4a16-bf16mtp-fixed"))
    proc = subprocess.run(
        [*MTPLINT, ckpt, "--vllm-source", str(repo), "--vllm-commit", "deadbeef1"],
        capture_output=True,
        text=True,
        env=dict(os.environ, MTPLINT_ENVS_DIR=str(tmp_path / "envs")),
    )
    assert proc.returncode == 2, proc.stderr
    assert "deadbeef1" in proc.stderr and "no such commit" in proc.stderr
