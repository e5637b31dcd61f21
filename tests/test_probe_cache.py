"""Probe cache entries carry their key, the schema version and a checksum; anything that does
not validate is a miss and is removed, so a poisoned entry can neither make a broken
checkpoint pass nor fail every run until the cache is cleared (issue 16, item 4)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
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

MTPLINT = [sys.executable, "-m", "mtplint.cli_main"]
RECIPE = "glm45-air-nvfp4-eh-proj-quantized"  # errors (MTP002, MTP003): exit 1, ~15 s cold
KEY = "a" * 64
OTHER_KEY = "b" * 64


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


def poisons(key: str, good_entry: bytes) -> dict[str, bytes]:
    """What the fault audit put in the cache, and what else a damaged entry can look like."""
    good = gzip.decompress(good_entry)
    header, _, payload = good.partition(b"\n")
    flipped = payload.replace(b'"schema"', b'"schemb"', 1)
    report = json.loads(payload)
    wrong = {**report, "load": [], "models": 1}
    other_version = header.replace(f'"schema": {SCHEMA_VERSION}'.encode(), b'"schema": 0')
    assert other_version != header
    return {
        "empty-object": gzip.compress(b"{}"),
        "empty-list": gzip.compress(b"[]"),
        "wrong-structure": gzip.compress(json.dumps(wrong).encode()),
        # Well-formed envelopes (right key, version and checksum) around what is no probe report:
        "enveloped-empty-object": cache.envelope(key, {}),
        "enveloped-list": cache.envelope(key, []),
        "enveloped-wrong-structure": cache.envelope(key, wrong),
        "enveloped-unknown-field": cache.envelope(key, {**report, "params_hit": []}),
        "enveloped-missing-field": cache.envelope(key, {k: v for k, v in report.items() if k != "load"}),
        "enveloped-older-report": cache.envelope(key, {**report, "schema": "mtplint/probe/v1"}),
        "unversioned-report": gzip.compress(payload),  # the pre-envelope format: a bare report
        "entry-of-another-key": cache.encode(OTHER_KEY if key != OTHER_KEY else KEY, ProbeReport.from_json(report)),
        "truncated-gzip": good_entry[: len(good_entry) // 2],
        "checksum-mismatch": gzip.compress(header + b"\n" + flipped),
        "other-schema-version": gzip.compress(other_version + b"\n" + payload),
        "not-gzip": b"{}",
    }


def test_round_trip_keeps_key_order(cache_dir):
    report = minimal_report()
    # Checks iterate these dicts: their order is part of the report.
    report.load = {"target": LoadResult(), "draft": LoadResult(fed={"z.weight": ["b"], "a.weight": ["a"]})}
    cache.store(KEY, report)
    loaded = cache.load(KEY)
    assert loaded == report and loaded.to_json() == report.to_json()
    assert list(loaded.load) == ["target", "draft"] and list(loaded.load["draft"].fed) == ["z.weight", "a.weight"]
    assert not list(cache_dir.glob("*.tmp"))


@pytest.mark.parametrize("name", sorted(poisons(KEY, cache.encode(KEY, minimal_report()))))
def test_invalid_entry_is_a_miss_and_removed(cache_dir, name):
    cache_dir.mkdir(parents=True)
    path = cache.entry_path(KEY)
    path.write_bytes(poisons(KEY, cache.encode(KEY, minimal_report()))[name])
    assert cache.load(KEY) is None
    assert not path.exists()


def test_missing_or_unreadable_entry_is_a_plain_miss(cache_dir):
    assert cache.load(KEY) is None
    cache_dir.mkdir(parents=True)
    cache.entry_path(KEY).mkdir()  # not a file: left alone, not an error
    assert cache.load(KEY) is None and cache.entry_path(KEY).is_dir()


# -- a real lint re-probes past every poisoned entry -------------------------------------------


def lint(ckpt: Path, cache_root: Path) -> subprocess.CompletedProcess:
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
    return ckpt, entry, report, entry.read_bytes()


POISONS_E2E = ["empty-object", "enveloped-list", "enveloped-wrong-structure", "entry-of-another-key", "truncated-gzip"]


@pytest.mark.probe
@pytest.mark.parametrize("name", POISONS_E2E)
def test_lint_reprobes_past_a_poisoned_entry(warm, name):
    ckpt, entry, baseline, good = warm
    key = entry.name.removesuffix(".json.gz")
    bad = poisons(key, good)[name]
    entry.write_bytes(bad)
    proc = lint(ckpt, entry.parent.parent)
    assert proc.returncode == 1, proc.stderr  # `{}` used to pass (exit 0), `[]` to fail (exit 3)
    report = json.loads(proc.stdout)
    assert report["probe"]["cached"] is False  # probed again
    assert report["findings"] == baseline["findings"]
    assert entry.read_bytes() != bad  # the poisoned file is gone, replaced by a valid entry
    assert cache.decode(key, entry.read_bytes()).schema == REPORT_SCHEMA


@pytest.mark.probe
def test_valid_entry_is_a_hit(warm):
    ckpt, entry, baseline, good = warm
    entry.write_bytes(good)
    proc = lint(ckpt, entry.parent.parent)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["probe"]["cached"] is True and report["findings"] == baseline["findings"]
