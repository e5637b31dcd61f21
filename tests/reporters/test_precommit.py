"""The pre-commit hook (.pre-commit-hooks.yaml, `mtplint pre-commit FILES...`): changed files map
to their checkpoint directories, each linted once, exit code the worst (issue 15).

The hook's entry runs in-process over two fixture checkpoints copied into a repository, with
their recorded probe reports standing in for the vLLM child (tests/support/recorded_cli.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from mtplint.cli.precommit import TRIGGERS, checkpoint_dirs
from paths import ROOT
from recorded_cli import case_checkpoint, mtplint, stand_in

FAILING, CLEAN = "dsv4-w4a16-bf16-mtp", "dsv4-official-h100-n1"


def hooks() -> list[dict]:
    return yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())


def test_manifest_hooks_run_the_entry_on_the_trigger_files():
    listed = hooks()
    assert [h["id"] for h in listed] == ["mtplint", "mtplint-system"]
    for hook in listed:
        assert {"id", "name", "entry", "language", "files"} <= set(hook)
        assert hook["entry"] == "mtplint pre-commit"
        assert hook["require_serial"] is True  # one process: each directory linted once
        assert hook.get("pass_filenames", True) is True
        files = re.compile(hook["files"])
        for name in TRIGGERS:
            assert files.search(name) and files.search(f"models/dsv4/{name}"), name
        for other in ("myconfig.json", "config.json.mtplint-orig", "config.json/x", "model.safetensors", "x.toml"):
            assert not files.search(other), other
    assert {h["language"] for h in listed} == {"python", "system"}


def test_manifest_is_valid_for_pre_commit():
    clientlib = pytest.importorskip("pre_commit.clientlib")
    clientlib.load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))


def _checkpoint(directory: Path, *, index: bool = False) -> Path:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text("{}")
    (directory / ("model.safetensors.index.json" if index else "model-00001-of-00001.safetensors")).write_text("{}")
    return directory


def test_changed_files_map_to_each_checkpoint_directory_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _checkpoint(Path("models/a"))
    _checkpoint(Path("models/b"), index=True)
    Path(".vscode").mkdir()
    Path(".vscode/config.json").write_text("{}")  # a config.json that is no checkpoint
    Path("mtplint.toml").write_text("")  # the project's settings, not a checkpoint's
    changed = [
        "models/b/config.json",
        "models/a/hf_quant_config.json",
        "./models/a/config.json",
        "models/a/model.safetensors.index.json",
        ".vscode/config.json",
        "mtplint.toml",
        "models/a/mtplint.toml",
        "models/a/README.md",
        str(tmp_path / "models/b/mtplint.toml"),
    ]
    assert checkpoint_dirs(changed) == [Path("models/b"), Path("models/a")]
    assert checkpoint_dirs(["models/c/config.json", "README.md"]) == []


@pytest.fixture
def repo(tmp_path, monkeypatch) -> tuple[Path, list[Path]]:
    """A repository with a failing and a clean checkpoint, as copies of two rule-case fixtures."""
    monkeypatch.chdir(tmp_path)
    dirs = {}
    for name, case in (("failing", FAILING), ("clean", CLEAN)):
        dest = tmp_path / "models" / name
        dest.parent.mkdir(exist_ok=True)
        subprocess.run(["cp", "-r", "--sparse=always", str(case_checkpoint(case)), str(dest)], check=True)
        dirs[dest] = case
    return tmp_path, stand_in(monkeypatch, dirs, tmp_path / "cache")


@pytest.mark.slow
def test_hook_entry_lints_each_changed_checkpoint_once_and_exits_with_the_worst(repo, capsys):
    root, probed = repo
    files = ["models/clean/config.json", "models/failing/config.json", "models/clean/mtplint.toml", "README.md"]
    (root / "models/clean/mtplint.toml").write_text("num-speculative-tokens = 1\n")
    rc = mtplint("pre-commit", "--output-format", "concise", *files)
    assert rc == 1
    assert probed == [(root / "models/clean").resolve(), (root / "models/failing").resolve()]
    captured = capsys.readouterr()
    assert "mtplint: models/clean\n" in captured.err and "mtplint: models/failing\n" in captured.err
    assert "MTP001" in captured.out

    assert mtplint("pre-commit", "-q", "models/clean/config.json") == 0  # the clean one alone passes
    assert mtplint("pre-commit", "README.md") == 0  # nothing to lint
    assert len(probed) == 2  # the second lint of models/clean was a cache hit


@pytest.mark.slow
def test_hook_args_are_check_options(repo, capsys):
    root, _ = repo
    (root / "mtplint.toml").write_text('[[suppress]]\ncode = "MTP002"\nlocation = "*"\nreason = "patched at serve"\n')
    rc = mtplint("pre-commit", "-q", "--select", "MTP002", "models/failing/config.json")
    assert rc == 0, capsys.readouterr()


def test_one_output_file_for_several_checkpoints_is_exit_2(repo, capsys):
    _, probed = repo
    changed = ["models/failing/config.json", "models/clean/config.json"]
    rc = mtplint("pre-commit", "--format", "json", "--output", "r.json", *changed)
    assert rc == 2
    assert "--output name one file, and 2 checkpoints changed" in capsys.readouterr().err
    assert probed == []
