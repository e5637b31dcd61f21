"""Probe cache entries are sealed with this user's secret and carry the inputs their key was
computed from, the schema version and a checksum; anything that does not validate is a miss
and is removed, so a poisoned or forged entry can neither make a broken checkpoint pass nor
fail every run until the cache is cleared (issue 16 item 4, issue 25 item 1)."""

from __future__ import annotations

import gzip
import json
import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.core.cache_dirs import read_entry, write_entry
from mtplint.probe import cache
from mtplint.probe.report import (
    REPORT_SCHEMA,
    SCHEMA_VERSION,
    ErrorRecord,
    LoadResult,
    ProbeReport,
    Request,
    VllmIdentity,
)

from fixtures.build import cached_build

MTPLINT = [sys.executable, "-m", "mtplint"]
RECIPE = "glm45-air-nvfp4-eh-proj-quantized"  # errors (MTP002, MTP003): exit 1, ~15 s cold
CLEAN_RECIPE = "glm45-air-nvfp4-clean"  # the same family, clean: exit 0
INPUTS = {"schema": SCHEMA_VERSION, "vllm": ["0.33.0", None, "py"], "target": {"inventory": "a" * 64}}
OTHER_INPUTS = {**INPUTS, "target": {"inventory": "b" * 64}}
KEY = cache.key_of(INPUTS)


def minimal_report() -> ProbeReport:
    return ProbeReport(
        vllm=VllmIdentity(version="0.33.0", commit=None),
        request=Request(sm=[9, 0], gpu_name="NVIDIA H100 80GB HBM3", gpu_memory=80 << 30),
        config_error=ErrorRecord(type="ValueError", message="x"),
    )


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path))
    return tmp_path / "probe"


def poisons(inputs: dict, good_entry: bytes) -> dict[str, bytes]:
    """What the fault audit put in the cache, and what else a damaged entry can look like."""
    good = gzip.decompress(good_entry)
    header, _, payload = good.partition(b"\n")
    flipped = payload.replace(b"schema", b"schemb", 1)
    report = marshal.loads(payload)
    wrong = {**report, "load": [], "models": 1}
    other_version = header.replace(f'"schema": {SCHEMA_VERSION}'.encode(), b'"schema": 0')
    assert other_version != header
    return {
        "empty-object": gzip.compress(b"{}"),
        "empty-list": gzip.compress(b"[]"),
        "wrong-structure": gzip.compress(json.dumps(wrong).encode()),
        "not-marshal": gzip.compress(header + b"\n" + b"\xff\x00garbage"),
        # Well-formed envelopes (right key, version and checksum) around what is no probe report:
        "enveloped-empty-object": cache.envelope(inputs, {}),
        "enveloped-list": cache.envelope(inputs, []),
        "enveloped-wrong-structure": cache.envelope(inputs, wrong),
        "enveloped-unknown-field": cache.envelope(inputs, {**report, "params_hit": []}),
        "enveloped-missing-field": cache.envelope(inputs, {k: v for k, v in report.items() if k != "load"}),
        "enveloped-older-report": cache.envelope(inputs, {**report, "schema": "mtplint/probe/v1"}),
        "enveloped-report-of-another-vllm": cache.envelope(
            inputs, {**report, "vllm": {"version": "0.1", "commit": None}}
        ),
        "unversioned-report": gzip.compress(payload),  # the pre-envelope format: a bare report
        "entry-of-other-inputs": cache.encode(OTHER_INPUTS, ProbeReport.from_json(report)),
        "truncated-gzip": good_entry[: len(good_entry) // 2],
        "checksum-mismatch": gzip.compress(header + b"\n" + flipped),
        "other-schema-version": gzip.compress(other_version + b"\n" + payload),
        "not-gzip": b"{}",
    }


def test_round_trip_keeps_key_order(cache_dir):
    report = minimal_report()
    # Checks iterate these dicts: their order is part of the report.
    report.load = {"target": LoadResult(), "draft": LoadResult(fed={"z.weight": ["b"], "a.weight": ["a"]})}
    cache.store(INPUTS, report)
    loaded = cache.load(INPUTS)
    assert loaded == report and loaded.to_json() == report.to_json()
    assert list(loaded.load) == ["target", "draft"] and list(loaded.load["draft"].fed) == ["z.weight", "a.weight"]
    assert not list(cache_dir.glob("*.tmp"))


@pytest.mark.parametrize("name", sorted(poisons(INPUTS, cache.encode(INPUTS, minimal_report()))))
def test_invalid_entry_is_a_miss_and_removed_even_when_sealed(cache_dir, name):
    """Sealed with this user's own secret (a bug of ours, not a forgery): the content is
    checked all the same."""
    path = cache.entry_path(KEY)
    write_entry(path, poisons(INPUTS, cache.encode(INPUTS, minimal_report()))[name])
    assert path.exists()
    assert cache.load(INPUTS) is None
    assert not path.exists()


def test_an_unsealed_entry_is_a_miss_whatever_it_holds(cache_dir):
    """What anyone who can write the cache directory can make: a perfect entry for these inputs
    (right name, inputs, schema and checksum), without the secret."""
    cache_dir.mkdir(parents=True)
    path = cache.entry_path(KEY)
    path.write_bytes(cache.encode(INPUTS, minimal_report()))
    assert cache.load(INPUTS) is None and not path.exists()


def test_an_entry_sealed_with_another_secret_or_moved_to_another_name_is_a_miss(cache_dir, monkeypatch):
    monkeypatch.setenv("MTPLINT_CACHE_SECRET", "one secret of at least a few words")
    cache.store(INPUTS, minimal_report())
    monkeypatch.setenv("MTPLINT_CACHE_SECRET", "another secret, another user")
    assert cache.load(INPUTS) is None
    monkeypatch.setenv("MTPLINT_CACHE_SECRET", "one secret of at least a few words")
    cache.store(INPUTS, minimal_report())
    moved = cache.entry_path(cache.key_of(OTHER_INPUTS))
    cache.entry_path(KEY).rename(moved)  # the seal covers the name: a re-keyed entry fails it
    assert cache.load(OTHER_INPUTS) is None


def test_without_a_secret_nothing_is_cached(cache_dir, monkeypatch, tmp_path):
    config = tmp_path / "config"
    config.mkdir(mode=0o500)  # the secret cannot be made here
    monkeypatch.delenv("MTPLINT_CACHE_SECRET", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    if os.geteuid() == 0:
        (config / "mtplint").write_text("a file where the secret's directory would be")
    cache.store(INPUTS, minimal_report())
    assert cache.load(INPUTS) is None and not cache.entry_path(KEY).exists()


def test_a_secret_file_others_can_read_is_no_secret(tmp_path, monkeypatch):
    from mtplint.core import cache_dirs

    monkeypatch.delenv("MTPLINT_CACHE_SECRET", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert cache_dirs.secret() is not None
    path = cache_dirs.secret_path()
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    path.chmod(0o644)
    cache_dirs._file_secret.cache_clear()
    assert cache_dirs.secret() is None


def test_cache_directories_are_private(cache_dir):
    cache.store(INPUTS, minimal_report())
    assert cache_dir.stat().st_mode & 0o777 == 0o700
    assert cache_dir.parent.stat().st_mode & 0o777 == 0o700


def test_missing_or_unreadable_entry_is_a_plain_miss(cache_dir):
    assert cache.load(INPUTS) is None
    cache_dir.mkdir(parents=True)
    cache.entry_path(KEY).mkdir()  # not a file: left alone, not an error
    assert cache.load(INPUTS) is None and cache.entry_path(KEY).is_dir()


# -- a real lint re-probes past every poisoned entry -------------------------------------------


def lint(ckpt: Path, cache_root: Path) -> subprocess.CompletedProcess:
    # The probe cache's own behaviour: no remembered verdict (pipeline.verdict_cache) in front of it.
    shutil.rmtree(cache_root / "verdicts", ignore_errors=True)
    env = {**os.environ, "MTPLINT_CACHE_DIR": str(cache_root)}
    return subprocess.run(
        [*MTPLINT, str(ckpt), "--format", "json", "-q"], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> tuple[Path, Path, dict, bytes]:
    """One real lint: the checkpoint, its cache root, its JSON report and its single cache entry."""
    root = tmp_path_factory.mktemp("probe-cache")
    ckpt = cached_build(RECIPE)
    proc = lint(ckpt, root)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["error"] > 0 and report["probe"]["cached"] is False
    (entry,) = (root / "probe").glob("*.json.gz")
    return ckpt, entry, report, read_entry(entry) or b""


def _inputs(entry_body: bytes) -> dict:
    return json.loads(gzip.decompress(entry_body).partition(b"\n")[0])["inputs"]


POISONS_E2E = ["empty-object", "enveloped-list", "enveloped-wrong-structure", "entry-of-other-inputs", "truncated-gzip"]


@pytest.mark.probe
@pytest.mark.parametrize("name", POISONS_E2E)
def test_lint_reprobes_past_a_poisoned_entry(warm, name):
    ckpt, entry, baseline, good = warm
    bad = poisons(_inputs(good), good)[name]
    write_entry(entry, bad)
    proc = lint(ckpt, entry.parent.parent)
    assert proc.returncode == 1, proc.stderr  # `{}` used to pass (exit 0), `[]` to fail (exit 3)
    report = json.loads(proc.stdout)
    assert report["probe"]["cached"] is False  # probed again
    assert report["findings"] == baseline["findings"]
    assert read_entry(entry) != bad  # the poisoned file is gone, replaced by a valid entry
    assert cache.decode(_inputs(good), read_entry(entry) or b"").schema == REPORT_SCHEMA


@pytest.mark.probe
def test_valid_entry_is_a_hit(warm):
    ckpt, entry, baseline, good = warm
    write_entry(entry, good)
    proc = lint(ckpt, entry.parent.parent)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["probe"]["cached"] is True and report["findings"] == baseline["findings"]


@pytest.mark.probe
def test_a_clean_checkpoints_report_rekeyed_onto_a_broken_one_decides_nothing(warm, tmp_path):
    """The audit's attack (issue 25 item 1): a clean checkpoint's well-formed report put in the
    broken checkpoint's entry, with the broken one's inputs and a recomputed checksum (anyone
    can compute both), but no seal: the broken checkpoint still lints broken."""
    ckpt, entry, baseline, good = warm
    clean = lint(cached_build(CLEAN_RECIPE), entry.parent.parent)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    (clean_entry,) = [e for e in (entry.parent).glob("*.json.gz") if e != entry]
    clean_body = read_entry(clean_entry) or b""
    payload = marshal.loads(gzip.decompress(clean_body).partition(b"\n")[2])
    entry.write_bytes(cache.envelope(_inputs(good), payload))  # forged: right name, inputs, checksum
    proc = lint(ckpt, entry.parent.parent)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # was 0 before entries were sealed
    report = json.loads(proc.stdout)
    assert report["probe"]["cached"] is False and report["findings"] == baseline["findings"]


@pytest.mark.probe
@pytest.mark.slow
def test_vllm_messages_name_the_users_checkpoint_cached_or_not(tmp_path):
    """vLLM reads a staged copy of the checkpoint and its messages name that copy; the report
    names the checkpoint as given, and a cached report (the same bytes at another path) names
    the path of the lint at hand, never the first one's or the probe's temporary directory."""
    from fixtures.build import build

    env = {**os.environ, "MTPLINT_CACHE_DIR": str(tmp_path / "cache")}
    said = []
    for name in ("first", "second"):
        ckpt = build("mimo-bf16", tmp_path / name)
        (ckpt / "configuration_mimo.py").unlink()  # config.json's auto_map still names it
        run = subprocess.run(
            [sys.executable, "-m", "mtplint", str(ckpt), "--trust-remote-code", "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
        )
        assert run.returncode == 1, run.stderr
        report = json.loads(run.stdout)
        (finding,) = [f for f in report["findings"] if f["code"] == "MTP009"]
        said.append((report["probe"]["cached"], finding["message"]))
    assert [cached for cached, _ in said] == [False, True]
    for (_, message), name in zip(said, ("first", "second"), strict=True):
        assert f"{tmp_path / name} does not appear to have a file named configuration_mimo.py" in message, message
        assert "mtplint-probe-" not in message
