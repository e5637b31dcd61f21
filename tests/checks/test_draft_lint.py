"""`mtplint TARGET --draft PATH [--method M]`: a draft served from its own checkpoint, probed as vLLM
builds it (its own quantization_config, its own class), findings located in its files; the same
for a draft on the hub; bad input is one line and exit 2 before anything is probed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hub_server import HubServer
from hub_server import run_cli as hub_cli
from test_input_hardening import assert_bad_input

from fixtures.build import cached_build
from fixtures.sparse import write_sparse

MTPLINT = [sys.executable, "-m", "mtplint"]
TARGET = "llama31-8b-instruct-fp8-dynamic"
CLEAN = "eagle3-llama31-8b"
TARGET_QUANT = "eagle3-llama31-8b-target-quant-config"  # catalog MTPL-023


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MTPLINT, *args], capture_output=True, text=True, timeout=600)


def lint_json(*args: str) -> tuple[int, dict]:
    proc = run(*args, "--format", "json", "-q")
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def target() -> Path:
    return cached_build(TARGET)


def _draft_dir(tmp_path: Path, architectures: list[str]) -> Path:
    d = tmp_path / "draft"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": architectures, "model_type": "llama"}))
    write_sparse(d / "model.safetensors", [("fc.weight", "BF16", (8, 24))])
    return d


# --- bad input: exit 2, one line, nothing probed ------------------------------------------


def test_method_without_draft(target):
    assert_bad_input(run(str(target), "--method", "eagle3"), "--method eagle3 needs --draft")


def test_unknown_method_lists_what_the_probed_release_declares(target):
    # Read from the installed vLLM's config/speculative.py, not from a list in mtplint.
    assert_bad_input(run(str(target), "--method", "medusa"), "--method medusa", "dspark", "draft_model", "dflash")


def test_an_embedded_method_with_several_targets(target):
    assert_bad_input(run(str(target), str(target), "--method", "dspark"), "--method dspark", "one PATH")


def test_a_method_without_a_draft_model_has_nothing_to_lint(target):
    assert_bad_input(run(str(target), "--method", "ngram"), "--method ngram", "without a draft model")


def test_missing_draft_directory(target, tmp_path):
    assert_bad_input(run(str(target), "--draft", str(tmp_path / "nope")), "nope", "--draft")


def test_draft_without_config(target, tmp_path):
    d = tmp_path / "draft"
    d.mkdir()
    write_sparse(d / "model.safetensors", [("fc.weight", "BF16", (8, 24))])
    assert_bad_input(run(str(target), "--draft", str(d)), "config.json", "--draft")


def test_a_value_vllm_cannot_take_names_the_draft_config(target, tmp_path):
    d = _draft_dir(tmp_path, ["LlamaForCausalLMEagle3"])
    (d / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_attention_heads": "32"})
    )
    assert_bad_input(run(str(target), "--draft", str(d)), f"{d}/config.json", "num_attention_heads")


def test_draft_with_several_targets(target):
    assert_bad_input(run(str(target), str(target), "--draft", str(target)), "one PATH")


def test_unknown_method_is_a_usage_error(target):
    proc = run(str(target), "--draft", str(target), "--method", "medusa")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "--method" in proc.stderr
    assert "dspark" in proc.stderr  # the release's own list


def test_methods_read_from_the_installed_release():
    from mtplint.pipeline import spec_methods

    declared = spec_methods.declared(sys.executable)
    assert declared is not None
    for method in ("draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark", "ngram", "deepseek_mtp"):
        assert method in declared
    assert spec_methods.canonical("deepseek_mtp", declared) == "mtp"


def test_methods_in_source_expand_aliases():
    from mtplint.pipeline.spec_methods import methods_in_source

    source = (
        "from typing import Literal\n"
        "A = Literal['x_mtp', 'mtp']\n"
        "B = Literal['eagle', A]\n"
        "SpeculativeMethod = Literal['ngram', B, 'dspark']\n"
    )
    assert methods_in_source(source) == ("ngram", "eagle", "x_mtp", "mtp", "dspark")
    assert methods_in_source("X = 1\n") is None


# --- the real probe -------------------------------------------------------------------------


@pytest.mark.probe
def test_clean_eagle3_draft(target):
    draft = cached_build(CLEAN)
    rc, report = lint_json(str(target), "--draft", str(draft))
    assert rc == 0
    assert report["findings"] == []  # `t2d`, which vLLM skips by design, is no MTP013
    assert report["inputs"]["path"] == str(draft)
    assert report["inputs"]["target"] == str(target)
    assert report["inputs"]["method"] == "eagle3"  # read from LlamaForCausalLMEagle3


@pytest.mark.probe
def test_draft_built_with_the_target_quant_config(target):
    draft = cached_build(TARGET_QUANT)
    rc, report = lint_json(str(target), "--draft", str(draft))
    assert rc == 1
    findings = report["findings"]
    mtp002 = [f for f in findings if f["code"] == "MTP002"]
    mtp005 = [f for f in findings if f["code"] == "MTP005"]
    assert len(mtp002) == 5 and len(mtp005) == 5, [(f["code"], f["message"]) for f in findings]
    assert {f["code"] for f in findings} == {"MTP002", "MTP005"}
    # Located in the draft's files, under the draft's own tensor names.
    assert {f["location"]["file"] for f in mtp002} == {"model.safetensors"}
    assert {f["location"]["tensor"].split(".")[0] for f in mtp002} == {"midlayer", "fc"}
    assert {f["location"]["file"] for f in mtp005} == {"config.json"}
    ids = {f["id"]: f for f in findings}
    assert all(ids[f["caused_by"]]["code"] == "MTP002" for f in mtp005)
    # No fix rewrites a draft linted without its target, nor patches vLLM's MTP drafts.
    assert all(not f["fixes"]["artifact"] and not f["fixes"]["patches"] for f in findings)
    text = run(str(target), "--draft", str(draft), "-q")
    assert text.returncode == 1
    assert f"{draft.name}/model.safetensors: MTP002" in text.stdout  # the draft's shard, not the target's
    assert "mtplint fix" not in text.stdout
    sarif = run(str(target), "--draft", str(draft), "-q", "--format", "sarif", "--repo-root", str(draft.parent))
    uris = {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for r in json.loads(sarif.stdout)["runs"][0]["results"]
        for loc in r["locations"]
    }
    assert uris == {f"{draft.name}/model.safetensors", f"{draft.name}/config.json"}


@pytest.mark.probe
def test_draft_on_the_hub_reads_as_the_local_one(target, tmp_path):
    draft = cached_build(TARGET_QUANT)
    _rc, local = lint_json(str(target), "--draft", str(draft))
    with HubServer() as hub:
        commit = hub.add("org/eagle3", draft)
        proc = hub_cli(hub, tmp_path / "home", str(target), "--draft", "hf://org/eagle3", "--format", "json", "-q")
        missing = hub_cli(hub, tmp_path / "home", str(target), "--draft", "hf://org/nope", "-q")
    assert proc.returncode == 1, proc.stderr[-2000:]
    there = json.loads(proc.stdout)
    assert there["inputs"]["path"] == f"hf://org/eagle3@{commit}"
    assert [(f["id"], f["message"], f["location"]) for f in there["findings"]] == [
        (f["id"], f["message"], f["location"]) for f in local["findings"]
    ]
    assert_bad_input(missing, "org/nope")


@pytest.mark.probe
def test_matrix_of_a_draft(target):
    draft = cached_build(TARGET_QUANT)
    proc = run("matrix", str(target), "--draft", str(draft), "-n", "1,2", "--format", "json", "-q")
    assert proc.returncode == 1, proc.stderr[-2000:]
    cells = json.loads(proc.stdout)["cells"]
    assert [c["inputs"]["num_speculative_tokens"] for c in cells] == [1, 2]
    for cell in cells:
        assert cell["inputs"]["path"] == str(draft) and cell["inputs"]["method"] == "eagle3"
        assert sorted({f["code"] for f in cell["findings"]}) == ["MTP002", "MTP005"]
