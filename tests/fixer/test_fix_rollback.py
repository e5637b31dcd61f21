"""`mtplint fix` keeps a change only when the re-lint adds no error (issue #13 item 1).

A harmful fix (registered here only, through the catalog's registry) drops the exclusion of the
BF16 MTP layer of a clean NVFP4 checkpoint: vLLM then builds the draft NVFP4 over BF16 weights.
Through the real probe the fix must be rolled back with every file as it was (same inode, same
bytes, no `.mtplint-orig`, no temp file), the report must name the fix, its change and the new
error, and a harmless fix run with it must still be kept.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fixtures.build import cached_build

RECIPE = "glm45-air-nvfp4-clean"  # layer 46 (MTP) BF16, excluded as "model.layers.46*" in both files
MTP_EXCLUDE = "model.layers.46*"
HARMFUL = "test-drop-mtp-exclusion"
HARMLESS = "test-add-a-note"


@pytest.fixture(scope="module")
def probe_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rollback-probe-cache")


def _copy(dest: Path) -> Path:
    subprocess.run(["cp", "-r", "--sparse=always", str(cached_build(RECIPE)), str(dest)], check=True)
    return dest


def state(root: Path) -> dict[str, object]:
    """Every file: small files by content, inode and mtime (a rollback puts the very file back);
    shards (69 GB of holes) by size, inode, mtime and their first MB, which holds the header."""
    out: dict[str, object] = {}
    for p in sorted(root.iterdir()):
        st = p.stat()
        if p.name.endswith(".safetensors"):
            with open(p, "rb") as f:
                content = hashlib.sha256(f.read(1 << 20)).hexdigest()
        else:
            content = hashlib.sha256(p.read_bytes()).hexdigest()
        out[p.name] = (content, st.st_size, st.st_ino, st.st_mtime_ns, st.st_mode)
    return out


def _drop_mtp_exclusion(inventory: Any, report: Any, findings: Any, *, options: Any = None) -> list[Any]:
    from mtplint.fixer.plan import Change

    def drop(key: str) -> Any:
        def edit(doc: dict[str, Any]) -> None:
            node = doc
            for part in key.split("."):
                node = node[part]
            node[:] = [e for e in node if e != MTP_EXCLUDE]

        return edit

    return [
        Change(
            fix=HARMFUL,
            file="config.json",
            summary="config.json: drop model.layers.46*",
            edit=drop("quantization_config.ignore"),
        ),
        Change(
            fix=HARMFUL,
            file="hf_quant_config.json",
            summary="hf_quant_config.json: drop model.layers.46*",
            edit=drop("quantization.exclude_modules"),
        ),
    ]


def _add_note(inventory: Any, report: Any, findings: Any, *, options: Any = None) -> list[Any]:
    from mtplint.fixer.plan import Change

    return [
        Change(
            fix=HARMLESS,
            file="config.json",
            summary="config.json: mtplint_test_note",
            edit=lambda doc: doc.__setitem__("mtplint_test_note", "kept"),
        )
    ]


@pytest.fixture
def test_fixes(monkeypatch, probe_cache):
    from mtplint.fixer.catalog import FIXES, Fix

    monkeypatch.setitem(FIXES, HARMLESS, Fix(HARMLESS, "a harmless config edit", _add_note))
    monkeypatch.setitem(FIXES, HARMFUL, Fix(HARMFUL, "drops the MTP layer's exclusion", _drop_mtp_exclusion))
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(probe_cache))


def run_fix(path: Path, *args: str) -> Any:
    from mtplint.cli.fix import fix_cmd

    return CliRunner().invoke(fix_cmd, [str(path), "-q", *args], catch_exceptions=False)


def test_the_harmful_plan_really_drops_the_entry():
    """Guards the test itself: the plan removes the entry from both files (else the rollback proves nothing)."""
    from mtplint.fixer.plan import render

    rendered = render(cached_build(RECIPE), _drop_mtp_exclusion(None, None, None))
    assert sorted(rendered.json) == ["config.json", "hf_quant_config.json"]
    for old, new in rendered.json.values():
        assert MTP_EXCLUDE in (old or "") and MTP_EXCLUDE not in new


@pytest.mark.probe
def test_a_fix_that_adds_an_error_is_rolled_back_to_the_last_byte(tmp_path, test_fixes):
    ckpt = _copy(tmp_path / "ckpt")
    before = state(ckpt)
    res = run_fix(ckpt, "--only", HARMFUL)
    assert res.exit_code == 1, res.output
    assert state(ckpt) == before  # same names (no .mtplint-orig, no temp file), same inodes and bytes
    out = res.output
    print(out)
    assert f"rolled back {HARMFUL}: it adds" in out, out
    assert "config.json: drop model.layers.46*" in out and "hf_quant_config.json: drop model.layers.46*" in out
    added = out.split(f"rolled back {HARMFUL}")[1].split("its changes (undone)")[0]
    assert "model.layers.46" in added and " error " in added, out  # the new error, about the MTP layer
    assert "every file is as it was before the fix" in out


@pytest.mark.probe
def test_with_a_good_fix_only_the_harmful_one_is_rolled_back(tmp_path, test_fixes):
    import json

    ckpt = _copy(tmp_path / "ckpt")
    before = state(ckpt)
    config_before = json.loads((ckpt / "config.json").read_text())
    res = run_fix(ckpt, "--only", f"{HARMLESS},{HARMFUL}")
    assert res.exit_code == 1, res.output
    out = res.output
    print(out)
    assert "trying each fix on its own" in out, out
    assert f"rolled back {HARMFUL}:" in out and f"rolled back {HARMLESS}" not in out, out
    after = state(ckpt)
    # The harmless edit is kept (config.json changed, its original kept); nothing else changed.
    assert json.loads((ckpt / "config.json").read_text()) == {**config_before, "mtplint_test_note": "kept"}
    assert (ckpt / "config.json.mtplint-orig").exists()
    assert {k: v for k, v in after.items() if k not in ("config.json", "config.json.mtplint-orig")} == {
        k: v for k, v in before.items() if k != "config.json"
    }
    assert not [p for p in os.listdir(ckpt) if "mtplint-tmp" in p]


# --- no probe: the journal and the comparison ------------------------------------------------


def _rendered(**json_files: str) -> Any:
    from mtplint.fixer.plan import Rendered

    return Rendered(json={n: (None, text) for n, text in json_files.items()}, shards={})


def test_restore_puts_back_the_very_files_and_removes_what_the_write_created(tmp_path):
    from mtplint.fixer.apply import apply
    from mtplint.fixer.guard import Journal

    (tmp_path / "config.json").write_text('{"a": 1}\n')
    (tmp_path / "hf_quant_config.json").write_text('{"q": 1}\n')
    (tmp_path / "hf_quant_config.json.mtplint-orig").write_text('{"q": 0}\n')  # an earlier fix's original
    before = state(tmp_path)
    rendered = _rendered(**{"config.json": '{"a": 2}\n', "hf_quant_config.json": "{}\n", "new.json": "{}\n"})
    journal = Journal.save(tmp_path, rendered)
    apply(tmp_path, rendered)
    assert (tmp_path / "config.json.mtplint-orig").exists() and (tmp_path / "new.json").exists()
    journal.restore()
    assert state(tmp_path) == before


def test_discard_keeps_the_write_and_leaves_no_temp_file(tmp_path):
    from mtplint.fixer.apply import apply
    from mtplint.fixer.guard import Journal

    (tmp_path / "config.json").write_text('{"a": 1}\n')
    rendered = _rendered(**{"config.json": '{"a": 2}\n'})
    journal = Journal.save(tmp_path, rendered)
    assert any(p.name.endswith(".mtplint-tmp") for p in tmp_path.iterdir())  # the saved original
    apply(tmp_path, rendered)
    journal.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "config.json.mtplint-orig"]
    assert (tmp_path / "config.json").read_text() == '{"a": 2}\n'


def test_out_dir_journal_puts_back_a_file_it_held_before(tmp_path):
    """A hub fix's --out: no originals are kept there, a file from an earlier run comes back."""
    from mtplint.fixer.apply import write_atomic
    from mtplint.fixer.guard import Journal

    (tmp_path / "model.safetensors.index.json").write_text("earlier\n")
    before = state(tmp_path)
    rendered = _rendered(**{"model.safetensors.index.json": "{}\n", "config.json": "{}\n"})
    journal = Journal.save(tmp_path, rendered, backups=False)
    for name, (_old, new) in rendered.json.items():
        write_atomic(tmp_path / name, new.encode())
    journal.restore()
    assert state(tmp_path) == before


def test_new_errors_compare_rule_and_key_not_message():
    from mtplint.core.findings import Finding, Location
    from mtplint.fixer.guard import new_errors
    from mtplint.fixer.plan import Change

    def f(code: str, key: str, msg: str = "m", severity: str = "error") -> Finding:
        return Finding(code, "n", severity, msg, Location("config.json"), key=key)

    before = [f("MTP002", "a", "3 tensors"), f("MTP005", "x", severity="warning")]
    after = [
        f("MTP002", "a", "4 tensors"),
        f("MTP005", "x"),
        f("MTP008", "t"),
        f("MTP009", "d"),
        f("MTP001", "e", severity="warning"),
    ]
    depth0 = Change(fix="set-mtp-depth", file="config.json", summary="", expects={"MTP009": "depth 0"})
    assert [g.id for g in new_errors(before, after, [depth0])] == ["MTP005:x", "MTP008:t"]


@pytest.mark.probe
def test_after_a_rollback_the_runtime_patch_is_named_not_the_fix_just_undone(tmp_path, monkeypatch):
    """MiniMax-M3-MXFP8 with a BF16 MTP layer: ModelOpt matches `ignored_layers` as substrings, and
    the draft's names (`model.layers.0.self_attn.qkv_proj`) are substrings of the trunk's layer 0
    (`language_model.model.layers.0...`), so no entry excludes the one without the other: the
    re-lint rolls the fix back (MTP003 on layer 0). What is left must point at the runtime patch;
    it pointed at `mtplint fix --only ignore-unquantized-mtp-block`, the fix just undone."""
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / "cache"))
    ckpt = tmp_path / "ckpt"
    subprocess.run(
        ["cp", "-r", "--sparse=always", str(cached_build("minimax-m3-mxfp8-mtp-bf16")), str(ckpt)], check=True
    )
    before = state(ckpt)
    res = run_fix(ckpt)
    assert res.exit_code == 1, res.output
    assert state(ckpt) == before
    assert "rolled back ignore-unquantized-mtp-block" in res.output
    left = res.output.split("every file is as it was before the fix")[1]
    assert "-> mtplint fix" not in left, left
    assert (
        "-> runtime patch draft-unquantized-mtp-block: MTPLINT_PATCHES=draft-unquantized-mtp-block vllm serve" in left
    )
