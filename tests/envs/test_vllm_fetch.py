"""`--vllm-commit <sha | short sha | branch@date>` of a commit that is no release: fetched on
demand from vLLM's git repository (lint/envs/fetch.py), here a stand-in served by `git daemon`
on 127.0.0.1 (never the internet): a repository built from two releases' Python trees (as
tests/envs/test_vllm_source.py builds one) with one commit between them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from recorded_cases import release_env
from test_vllm_source import _commit_tree, _git

from fixtures.build import cached_build

pytestmark = pytest.mark.probe
MTPLINT = [sys.executable, "-m", "mtplint"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """(git URL, the commit between the releases, the 0.33.0 commit), served while the module runs."""
    import importlib.util

    served = tmp_path_factory.mktemp("git-server")
    repo = served / "vllm.git"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _commit_tree(repo, release_env("0.29.0") / "site" / "vllm", "0.29.0")
    (repo / "vllm" / "mtplint_marker.py").write_text("# a commit on main after v0.29.0\n")
    _git(repo, "add", "-A", "vllm")
    _git(repo, "commit", "-q", "-m", "a change after v0.29.0")
    between = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "vllm" / "mtplint_marker.py").unlink()
    newest = _commit_tree(repo, Path(importlib.util.find_spec("vllm").origin).parent, "0.33.0")
    # What GitHub allows: fetching any commit by id, and partial (commits-only) fetches.
    _git(repo, "config", "uploadpack.allowAnySHA1InWant", "true")
    _git(repo, "config", "uploadpack.allowFilter", "true")
    port = _free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            f"--base-path={served}",
            "--export-all",
            "--listen=127.0.0.1",
            f"--port={port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"git://127.0.0.1:{port}/vllm.git"
    for _ in range(100):
        if subprocess.run(["git", "ls-remote", url], capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    yield url, between, newest
    daemon.terminate()
    daemon.wait(timeout=10)


def _run(args: list[str], envs: Path, url: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MTPLINT_ENVS_DIR=str(envs), MTPLINT_VLLM_GIT=url)
    return subprocess.run([*MTPLINT, *args], capture_output=True, text=True, timeout=900, env=env)


def _lint(commit: str, envs: Path, url: str) -> subprocess.CompletedProcess:
    ckpt = str(cached_build("dsv4-flash-w4a16-bf16mtp-fixed"))
    return _run([ckpt, "--kv-cache-dtype", "fp8", "--vllm-commit", commit, "--format", "json"], envs, url)


def test_a_commit_is_fetched_provisioned_and_reused(remote, tmp_path):
    url, between, _ = remote
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "0.29.0").symlink_to(release_env("0.29.0"))  # the nearest release, at hand
    first = _lint(between, envs, url)
    assert first.returncode in (0, 1), first.stderr[-3000:]
    report = json.loads(first.stdout)
    # As setuptools-scm writes it for a build one commit after v0.29.0.
    identity = {k: report["vllm"][k] for k in ("version", "commit")}
    assert identity == {"version": f"0.29.1.dev1+g{between[:9]}", "commit": "g" + between[:9]}
    assert report["vllm"]["shared"] == ["torch"]  # a tree without requirements/: the interpreter's libraries
    assert "MTP010" in {f["code"] for f in report["findings"]}  # the 0.29 tree's verdict (test_vllm_source)
    assert f"fetching vLLM commit {between}" in first.stderr and "history fetched" in first.stderr
    assert "git fetch --depth 1" in first.stderr and "ready in" in first.stderr
    record = json.loads((envs / between[:12] / "env.json").read_text())
    assert record["kind"] == "commit" and record["remote"] == url and record["commit"] == between
    assert record["nearest_release"] == "0.29.0"
    again = _lint(between[:9], envs, url)  # a short id of the same commit: no fetch, no provisioning
    assert again.returncode == first.returncode, again.stderr[-3000:]
    assert "fetching" not in again.stderr and "provisioning" not in again.stderr
    listed = _run(["env", "list"], envs, url)
    row = next(line for line in listed.stdout.splitlines() if line.startswith(between[:12]))
    assert "fetched commit" in row and url in row, listed.stdout


@pytest.mark.parametrize(("when", "expected"), [("main@2099-12-31", "0.33.0"), ("main@2099-12-31T00:00", "0.33.0")])
def test_branch_at_date_names_the_branch_tip_then(remote, tmp_path, monkeypatch, when, expected):
    """Resolved and versioned without provisioning (no vLLM import): the tip, at its tag."""
    from mtplint.envs import fetch, source

    url, _, newest = remote
    monkeypatch.setenv("MTPLINT_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("MTPLINT_VLLM_GIT", url)
    said: list[str] = []
    sha, history = fetch.resolve(when, said.append)
    assert sha == newest and source.version_at(history, sha) == (expected, expected)
    assert said[0] == f"fetching vLLM commit {when} from {url} (commit history only)", said


@pytest.mark.parametrize("commit", ["deadbeef1", "d" * 40, "main@1990-01-01"])
def test_a_commit_the_repository_lacks_is_bad_input_naming_it(remote, tmp_path, commit):
    url, _, _ = remote
    proc = _lint(commit, tmp_path / "envs", url)
    assert proc.returncode == 2, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert commit in line and url in line and "Traceback" not in proc.stderr


def test_an_unreachable_repository_is_a_failure_saying_what_was_tried(tmp_path):
    url = f"git://127.0.0.1:{_free_port()}/vllm.git"  # nothing listens there
    proc = _lint("0123456789abcdef0123456789abcdef01234567", tmp_path / "envs", url)
    assert proc.returncode == 3, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert f"git ls-remote {url}" in line and "MTPLINT_VLLM_GIT" in line
