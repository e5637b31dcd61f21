"""Issue #36 item 6: validating at export time, from a real `save_pretrained`.

A tiny GLM-4.5 (MoE, one MTP layer) is released BF16 through transformers' own save_pretrained,
then re-exported W4A16 through compressed-tensors' own compression, as an llm-compressor run
writes it (fixtures/tiny_export.py). The exporter calls `mtplint.lint()` on what it just wrote,
as the README's "Validate at export time" shows, and the real probe judges each export:

- the original release lints clean;
- the export that drops the MTP layer (transformers builds none) is MTP006;
- the export that grafts the BF16 MTP layer back, with the ignore list compressed-tensors wrote
  (only modules the model had), is MTP002; `mtplint fix` adds the exclusions and the re-lint
  is clean of errors.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import mtplint
import pytest

from fixtures.tiny_export import quantized_export, release

pytestmark = [pytest.mark.probe, pytest.mark.slow]


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    return release(tmp_path_factory.mktemp("release") / "glm45-tiny")


def _codes(report) -> dict[str, int]:
    """Error root causes by code (their consequences are told under them)."""
    counts: dict[str, int] = {}
    for f in report.findings:
        if f.severity == "error" and f.caused_by is None:
            counts[f.code] = counts.get(f.code, 0) + 1
    return counts


def test_the_original_release_lints_clean(original):
    report = mtplint.lint(original)
    assert report.exit_code == 0 and not _codes(report), [f.message for f in report.findings]


def test_an_export_that_drops_the_mtp_layer_is_refused_at_save_time(original, tmp_path):
    out = quantized_export(original, tmp_path / "w4a16", graft_mtp=False)
    report = mtplint.lint(out)
    assert report.exit_code == 1
    assert set(_codes(report)) == {"MTP006"}, _codes(report)
    (missing,) = [f for f in report.findings if f.code == "MTP006"]
    assert missing.location.config_key == "num_nextn_predict_layers"


def test_a_grafted_bf16_mtp_layer_needs_its_exclusions_and_the_fixer_adds_them(original, tmp_path):
    out = quantized_export(original, tmp_path / "w4a16-mtp", graft_mtp=True)
    report = mtplint.lint(out)
    assert report.exit_code == 1
    assert set(_codes(report)) == {"MTP002"}, _codes(report)
    before = (out / "config.json").read_text()
    fixed = tmp_path / "fixed"
    shutil.copytree(out, fixed)
    run = subprocess.run(
        [sys.executable, "-m", "mtplint", "fix", str(fixed), "--only", "ignore-unquantized-mtp-block"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (fixed / "config.json.mtplint-orig").read_text() == before
    after = mtplint.lint(fixed)
    assert after.exit_code == 0 and not _codes(after), [f.message for f in after.findings]
