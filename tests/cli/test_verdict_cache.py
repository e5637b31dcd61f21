"""Remembered verdicts (pipeline.verdict_cache) and the remembered vLLM identity
(probe.identity_memo): a repeated lint of an unchanged checkpoint skips its inventory, probe
report and checks, and anything that could change the verdict is a miss."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.core.cache_dirs import read_entry, write_entry
from mtplint.core.probe_summary import ProbedVllm, ProbeSummary
from mtplint.core.run_inputs import RunInputs
from mtplint.pipeline import verdict_cache
from mtplint.probe import identity_memo
from mtplint.probe.runner import vllm_identity

from fixtures.build import cached_build

MTPLINT = [sys.executable, "-m", "mtplint"]
BROKEN = "glm45-air-nvfp4-eh-proj-quantized"  # MTP002, MTP003: exit 1
CLEAN = "glm45-air-nvfp4-clean"  # the same family: exit 0


def lint(ckpt: Path, cache_root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MTPLINT_CACHE_DIR": str(cache_root)}
    return subprocess.run([*MTPLINT, str(ckpt), "-q", *args], capture_output=True, text=True, env=env, timeout=600)


def verdicts(cache_root: Path) -> list[Path]:
    return sorted((cache_root / "verdicts").glob("*.marshal"))


def linked_copy(src: Path, dst: Path) -> Path:
    """The checkpoint under another path: shards hard-linked (same bytes, no copy), small files copied."""
    dst.mkdir()
    for f in src.iterdir():
        if f.suffix == ".safetensors":
            try:
                os.link(f, dst / f.name)
                continue
            except OSError:
                pass
        shutil.copy(f, dst / f.name)
    return dst


@pytest.fixture(scope="module")
def remembered(tmp_path_factory) -> tuple[Path, Path, dict]:
    """A broken checkpoint linted once: its cache root and JSON report."""
    root = tmp_path_factory.mktemp("verdicts")
    ckpt = cached_build(BROKEN)
    proc = lint(ckpt, root, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    assert len(verdicts(root)) == 1
    return ckpt, root, json.loads(proc.stdout)


@pytest.mark.probe
def test_an_unchanged_checkpoint_is_recalled_without_the_probe(remembered):
    ckpt, root, first = remembered
    shutil.rmtree(root / "probe")  # a recalled lint reads no probe report and runs no probe
    proc = lint(ckpt, root, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    again = json.loads(proc.stdout)
    assert again["findings"] == first["findings"] and again["summary"] == first["summary"]
    assert again["probe"]["cached"] is True
    assert not (root / "probe").exists() or not list((root / "probe").glob("*.json.gz"))


@pytest.mark.probe
def test_full_output_of_a_recalled_lint_is_the_full_lints(remembered, tmp_path):
    """-v renders the draft's module table: a remembered lint keeps its facts, so a recalled -v
    reads no probe report (none is left to read) and prints what a lint without the verdict prints."""
    ckpt, root = remembered[0], tmp_path / "cache"  # its own cache: the probe report is moved aside
    lint(ckpt, root, "-v")  # remembered (with its module table)
    shutil.move(root / "probe", root / "probe-aside")
    recalled = lint(ckpt, root, "-v")
    assert not (root / "probe").exists() or not list((root / "probe").glob("*")), "the recalled -v ran the probe"
    shutil.rmtree(root / "probe", ignore_errors=True)
    shutil.move(root / "probe-aside", root / "probe")  # the full lint below reads the same cached report
    for v in verdicts(root):
        v.unlink()
    full = lint(ckpt, root, "-v")
    assert recalled.returncode == full.returncode == 1
    assert recalled.stdout == full.stdout and "draft module" in full.stdout


@pytest.mark.probe
def test_output_options_and_a_fix_dry_run_share_the_lints_verdict(remembered):
    """How findings are shown (-v, --format json) or acted on (fix --dry-run) is not what they
    are: one lint, one remembered verdict."""
    ckpt, root, _ = remembered
    (entry,) = verdicts(root)
    # A store replaces the file (a new inode); a recall only refreshes its mtime (cache_dirs' LRU).
    stored = (entry.read_bytes(), entry.stat().st_ino)
    for args in ([], ["-v"], ["--format", "json"], ["--output-format", "full"]):
        assert lint(ckpt, root, *args).returncode == 1
    env = {**os.environ, "MTPLINT_CACHE_DIR": str(root)}
    fix = subprocess.run([*MTPLINT, "fix", str(ckpt), "--dry-run", "-q"], capture_output=True, text=True, env=env)
    assert fix.returncode in (0, 1), fix.stderr
    assert verdicts(root) == [entry]
    # Each recalled it: none stored its own verdict over it.
    assert (entry.read_bytes(), entry.stat().st_ino) == stored


@pytest.mark.probe
def test_another_checkpoints_verdict_under_this_ones_name_decides_nothing(remembered, tmp_path):
    """A clean checkpoint's verdict, sealed, stored under the broken checkpoint's entry name:
    the entry's inputs (the checkpoint's signature) differ, so it is a miss and the lint says
    broken."""
    ckpt, root, first = remembered
    broken_root, clean_root = tmp_path / "broken", tmp_path / "clean"
    if (root / "probe").exists():
        shutil.copytree(root / "probe", broken_root / "probe")  # the probe report, not the verdict
    assert lint(ckpt, broken_root, "--format", "json").returncode == 1
    assert lint(cached_build(CLEAN), clean_root, "--format", "json").returncode == 0
    (broken_entry,), (clean_entry,) = verdicts(broken_root), verdicts(clean_root)
    clean_body = read_entry(clean_entry)
    assert clean_body is not None
    write_entry(broken_entry, clean_body)
    proc = lint(ckpt, broken_root, "--format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["findings"] == first["findings"]


@pytest.mark.probe
def test_a_changed_checkpoint_is_linted_again(remembered, tmp_path):
    """The same bytes under another path are linted in full once and then recalled; a fix's
    leftover lock in it (no header or config changed) is a miss that MTP022 reports."""
    ckpt, root, _ = remembered
    copy = linked_copy(ckpt, tmp_path / "copy")
    first = lint(copy, root, "--format", "json")
    assert first.returncode == 1, first.stderr
    assert len(verdicts(root)) >= 2
    (copy / ".mtplint-fix.lock").write_text("")
    proc = lint(copy, root, "--format", "json")
    codes = {f["code"] for f in json.loads(proc.stdout)["findings"]}
    assert "MTP022" in codes and "MTP022" not in {f["code"] for f in json.loads(first.stdout)["findings"]}


def test_a_verdict_of_another_vllm_is_not_recalled(tmp_path, monkeypatch):
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / "cache"))
    pre = {"format": "x", "target": "sig"}
    identity = {"version": "0.33.0", "commit": "g1", "python": "py"}
    full = verdict_cache.full_inputs(pre, identity, {"sm": [9, 0]})
    verdict_cache.store(
        pre, full, [], [], RunInputs(path="p"), ProbedVllm("0.33.0"), ProbeSummary(cached=False), None, (1, 1), []
    )
    entry = verdict_cache.candidate(pre)
    assert entry is not None
    assert verdict_cache.recall(entry, full) is not None
    other = verdict_cache.full_inputs(pre, {**identity, "commit": "g2"}, {"sm": [9, 0]})
    assert verdict_cache.recall(entry, other) is None
    assert verdict_cache.recall(entry, verdict_cache.full_inputs(pre, identity, {"sm": [10, 0]})) is None


def test_an_unsealed_verdict_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / "cache"))
    pre = {"format": "x", "target": "sig"}
    full = verdict_cache.full_inputs(pre, {"version": "1"}, {})
    verdict_cache.store(pre, full, [], [], RunInputs(path="p"), ProbedVllm(), ProbeSummary(), None, (0, 0), [])
    path = verdict_cache._entry(pre)
    body = read_entry(path)
    assert body is not None
    path.write_bytes(body)  # the same bytes without this user's seal
    assert verdict_cache.candidate(pre) is None


# -- the remembered vLLM identity ----------------------------------------------------------


@pytest.fixture
def fake_vllm(tmp_path) -> tuple[Path, Path, Path]:
    """An interpreter (a script around this one) whose site holds a `vllm` distribution; the
    script counts its runs."""
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm" / "_version.py").write_text("__commit_id__ = 'gaaaaaaa'\n")
    dist = site / "vllm-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.1.0\n")
    runs = tmp_path / "runs"
    exe = tmp_path / "python"
    exe.write_text(f'#!/bin/sh\necho run >> "{runs}"\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    exe.chmod(0o755)
    return exe, site, runs


def test_the_identity_is_remembered_until_a_file_it_came_from_changes(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / "cache"))
    exe, site, runs = fake_vllm
    first = vllm_identity(str(exe))
    assert (first["version"], first["commit"]) == ("0.1.0", "gaaaaaaa")
    assert vllm_identity(str(exe)) == first and runs.read_text().count("run") == 1  # remembered
    (site / "vllm" / "_version.py").write_text("__commit_id__ = 'gbbbbbbbbb'\n")  # rebuilt in place
    assert vllm_identity(str(exe))["commit"] == "gbbbbbbbbb" and runs.read_text().count("run") == 2
    shutil.move(site / "vllm-0.1.0.dist-info", site / "vllm-0.2.0.dist-info")  # upgraded
    meta = site / "vllm-0.2.0.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace("0.1.0", "0.2.0"))
    assert vllm_identity(str(exe))["version"] == "0.2.0"


def test_no_vllm_is_never_remembered(tmp_path, monkeypatch):
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / "cache"))
    exe = tmp_path / "python"
    exe.write_text(f'#!/bin/sh\nPYTHONPATH="{tmp_path}" exec "{sys.executable}" -S "$@"\n')
    exe.chmod(0o755)
    assert vllm_identity(str(exe))["version"] is None
    assert identity_memo.load(str(exe)) is None


# -- what a remembered verdict is keyed by -------------------------------------------------


def _tiny_checkpoint(root: Path) -> Path:
    """config.json and one shard holding one tensor (header only; the data a hole)."""
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"architectures": ["MiMoForCausalLM"], "model_type": "mimo"}))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    header += b" " * (-len(header) % 8)
    with (root / "model.safetensors").open("wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + 8)
    return root


@pytest.mark.parametrize(
    "change",
    ["config bytes", "remote code", "fix leftover", "draft's fix leftover", "draft's remote code", "settings"],
)
def test_anything_the_verdict_depends_on_renames_its_entry(tmp_path, change):
    from mtplint.config.settings import load_settings

    target = _tiny_checkpoint(tmp_path / "target")
    draft = _tiny_checkpoint(tmp_path / "draft")
    settings = load_settings(target, {"draft": str(draft)}).lint
    before = verdict_cache.pre_inputs(target, settings, [])
    assert before is not None and verdict_cache.pre_inputs(target, settings, []) == before
    if change == "config bytes":
        (target / "config.json").write_text((target / "config.json").read_text() + " ")
    elif change == "remote code":
        (target / "configuration_mimo.py").write_text("X = 1\n")
    elif change == "fix leftover":
        (target / ".mtplint-fix.lock").write_text("")
    elif change == "draft's fix leftover":
        (draft / ".mtplint-fix.lock").write_text("")
    elif change == "draft's remote code":
        (draft / "modeling_mimo.py").write_text("X = 1\n")
    else:
        settings = settings.replace(num_speculative_tokens=2)
    assert verdict_cache.pre_inputs(target, settings, []) != before


def test_only_the_settings_that_decide_findings_key_the_verdict(tmp_path):
    from mtplint.config.settings import load_settings

    target = _tiny_checkpoint(tmp_path / "target")
    plain = verdict_cache.pre_inputs(target, load_settings(target, {}).lint, [])
    assert plain is not None
    for shown in (
        {"verbose": True},
        {"formats": ["json"]},
        {"quiet": True},
        {"dry_run": True, "only": "set-mtp-depth"},
    ):
        assert verdict_cache.pre_inputs(target, load_settings(target, shown).lint, []) == plain, shown
    for decides in ({"select": ["MTP001"]}, {"gpu": "b200"}, {"tensor_parallel_size": 2}):
        assert verdict_cache.pre_inputs(target, load_settings(target, decides).lint, []) != plain, decides


def test_a_reference_lint_is_never_remembered(tmp_path):
    from mtplint.config.settings import load_settings

    target = _tiny_checkpoint(tmp_path / "target")
    assert verdict_cache.pre_inputs(target, load_settings(target, {"reference": str(target)}).lint, []) is None
    assert verdict_cache.pre_inputs(target, load_settings(target, {"no_cache": True}).lint, []) is None
