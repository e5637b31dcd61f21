"""MTP027 (draft-target-pairing) on real fixture checkpoints and the real published draft config
of ../shared/real-checkpoints, over a recorded probe report: the tokenizer files of both sides
(fast and slow formats), vocab_size, and a speculators verifier's name, revision and architectures."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

import pytest
from mtplint.core.run_inputs import RunInputs
from mtplint.engine.evaluate import evaluate
from mtplint.inventory.checkpoint import load_inventory
from mtplint.inventory.tokenizer import read_tokenizer
from paths import ROOT
from recorded_cases import recorded_report

from fixtures import tokenizer
from fixtures.build import cached_build

SHARED = ROOT.parent / "shared" / "real-checkpoints"
TARGET = "llama31-8b-instruct-fp8-dynamic"
DRAFT = "dflash-llama31-8b"
COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


def _write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def _slow(fast_files: dict[str, str]) -> dict[str, str]:
    """The same vocabulary as a slow BPE tokenizer writes it: vocab.json, merges.txt, its config."""
    fast = json.loads(fast_files["tokenizer.json"])
    return {
        "vocab.json": json.dumps(fast["model"]["vocab"]),
        "merges.txt": "#version: 0.2\nt h\nth e\n",
        "tokenizer_config.json": fast_files["tokenizer_config.json"],
    }


def _lint(tmp_path: Path, *, draft_files=None, target_files=None, draft_config=None, target_config=None, target=None):
    draft_inv = load_inventory(cached_build(DRAFT))
    target_inv = load_inventory(cached_build(TARGET))
    draft_inv = dataclasses.replace(
        draft_inv,
        root=_write(tmp_path / "draft", draft_files or {}),
        config=draft_config if draft_config is not None else draft_inv.config,
    )
    target_inv = dataclasses.replace(
        target_inv,
        root=_write(tmp_path / "target", target_files or {}),
        config=target_config if target_config is not None else target_inv.config,
    )
    recorded = recorded_report("dflash-llama31-8b-verifier-home-path")
    assert recorded is not None
    inputs = RunInputs(path=str(tmp_path / "draft"), target=target or str(tmp_path / "target"), method="dflash")
    findings, _ = evaluate(draft_inv, recorded[1], inputs, select=["MTP027"], target=target_inv)
    return findings


def test_tokenizer_read_from_fast_and_slow_files(tmp_path):
    llama = tokenizer.files("llama31")
    fast = read_tokenizer(_write(tmp_path / "fast", llama))
    slow = read_tokenizer(_write(tmp_path / "slow", _slow(llama)))
    assert fast is not None and slow is not None
    assert fast.vocab == {**slow.vocab, **{t: i for t, i in fast.vocab.items() if t not in slow.vocab}}
    assert fast.special == {"bos": "<|begin_of_text|>", "eos": "<|eot_id|>"}
    assert fast.special_id("eos") == fast.vocab["<|eot_id|>"]
    assert slow.merges_digest is not None and fast.merges_digest is None  # a WordLevel model has no merges
    assert read_tokenizer(_write(tmp_path / "none", {})) is None


def _recipe_files(name: str) -> dict[str, str]:
    return tomllib.loads((ROOT / "fixtures" / "recipes" / f"{name}.toml").read_text())["files"]


def test_ids_naming_other_tokens_are_an_error(tmp_path):
    foreign = _recipe_files("eagle3-llama31-8b-foreign-tokenizer")  # Qwen's, its words at other ids
    (f,) = _lint(tmp_path, draft_files=foreign, target_files=tokenizer.files("llama31"))
    assert (f.severity, f.basis, f.location.file) == ("error", "files", "tokenizer.json")
    assert "22 of the 24 token ids both vocabularies hold name different tokens (id 1 is '!' to the draft" in f.message
    assert "compares only vocab_size, and only for method draft_model" in f.message


def test_added_tokens_renamed_alone_are_a_warning(tmp_path):
    """Llama-3 -> 3.1 renamed reserved special tokens (128008 `<|reserved_special_token_4|>` ->
    `<|eom_id|>`): the ordinary vocabulary agrees, so not an error."""
    llama = tokenizer.files("llama31")
    renamed = llama["tokenizer.json"].replace("<|eom_id|>", "<|reserved_special_token_4|>")
    (f,) = _lint(tmp_path, draft_files={**llama, "tokenizer.json": renamed}, target_files=llama)
    assert f.severity == "warning"
    assert "1 added-token ids (special or reserved) name different tokens" in f.message
    assert "'<|reserved_special_token_4|>' to the draft, '<|eom_id|>' to the target" in f.message


def test_the_same_vocabulary_in_another_format_is_silent(tmp_path):
    llama = tokenizer.files("llama31")
    assert _lint(tmp_path, draft_files=_slow(llama), target_files=llama) == []


def test_special_tokens_on_other_ids_are_a_warning(tmp_path):
    llama = tokenizer.files("llama31")
    config = json.loads(llama["tokenizer_config.json"])
    draft = {**llama, "tokenizer_config.json": json.dumps({**config, "eos_token": "<|end_of_text|>"})}
    (f,) = _lint(tmp_path, draft_files=draft, target_files=llama)
    assert f.severity == "warning" and "eos" in f.message


def test_no_draft_tokenizer_is_silent_unless_vocab_size_differs(tmp_path):
    llama = tokenizer.files("llama31")
    assert _lint(tmp_path / "same", target_files=llama) == []
    config = json.loads(cached_build(DRAFT).joinpath("config.json").read_text())
    (f,) = _lint(tmp_path / "other", target_files=llama, draft_config={**config, "vocab_size": 32000})
    assert (f.severity, f.location.config_key) == ("error", "vocab_size")
    assert "vocab_size 32000 is not the target's 128256" in f.message


def test_published_community_draft_verifier_is_a_home_directory(tmp_path):
    """The community MiniMax-M2.7 DFlash draft's config as published: its verifier is a path on the
    trainer's machine, so it names no target: info, never a warning or an error."""
    path = SHARED / "minimax-m27-dflash-draft-community" / "config.json"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    config = json.loads(path.read_text())
    # Its target as MiniMax-M2.7's config declares it (vocab_size 200064, MiniMaxM2ForCausalLM).
    target = {"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "vocab_size": 200064}
    (f,) = _lint(tmp_path, draft_config=config, target_config=target)
    assert (f.severity, f.location.config_key) == ("info", "speculators_config.verifier")
    assert "'/home/<USER>/iq4_full_run/verifier_meta_v11' is a path on the machine" in f.message


@pytest.mark.parametrize(
    ("name", "revision", "expected"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", COMMIT_A, []),
        ("meta-llama/Llama-3.1-8B-Instruct", COMMIT_B, ["trained against revision bbbbbbbbbbbb"]),
        ("meta-llama/Llama-3.1-8B", None, ["'meta-llama/Llama-3.1-8B' is not the target linted"]),
    ],
)
def test_verifier_against_a_hub_target(tmp_path, name, revision, expected):
    config = json.loads(cached_build(DRAFT).joinpath("config.json").read_text())
    verifier = {
        "name_or_path": name,
        "architectures": ["LlamaForCausalLM"],
        **({"revision": revision} if revision else {}),
    }
    config["speculators_config"] = {"verifier": verifier}
    found = _lint(tmp_path, draft_config=config, target=f"hf://meta-llama/Llama-3.1-8B-Instruct@{COMMIT_A}")
    assert [f.severity for f in found] == ["warning"] * len(expected)
    for f, text in zip(found, expected, strict=True):
        assert text in f.message


def test_local_target_name_is_not_compared(tmp_path):
    """A local target's hub name is unknown: a verifier naming a hub id is not a mismatch."""
    config = json.loads(cached_build(DRAFT).joinpath("config.json").read_text())
    config["speculators_config"] = {"verifier": {"name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}}
    assert _lint(tmp_path, draft_config=config) == []
