"""Drafts named in the user's own `vllm serve` command (`--speculative-config '{"model": X, ...}'`),
through the real probe: the same findings as `mtplint TARGET --draft X --method M -n N` for every
kind of separate draft, the method the probed vLLM's own SpeculativeConfig resolves from X as
written (a DFlash head under a plain name is served as `draft_model`: MTP026), a draft on the hub
read header-only, the target itself as the speculative model (MTP on the target), and a drafter
the target carries named by its method alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hub_server import HubServer
from hub_server import run_cli as hub_cli

from fixtures.build import cached_build

pytestmark = [pytest.mark.probe, pytest.mark.slow]

MTPLINT = [sys.executable, "-m", "mtplint"]
LLAMA = "llama31-8b-instruct-fp8-dynamic"


def _lint(*args: str) -> tuple[int, dict]:
    head, sep, tail = args[: args.index("--")] if "--" in args else args, ("--",) if "--" in args else (), ()
    if sep:
        tail = args[args.index("--") + 1 :]
    cmd = [*MTPLINT, *head, "--format", "json", "-q", *sep, *tail]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def _serve(target: str, spec: dict, *flags: str) -> tuple[int, dict]:
    return _lint("check", "--", "vllm", "serve", target, "--speculative-config", json.dumps(spec), *flags)


def _summary(report: dict) -> tuple[list[tuple[str, str, str]], dict]:
    inputs = {k: v for k, v in report["inputs"].items() if k != "settings_files"}
    return [(f["code"], f["message"], json.dumps(f["location"])) for f in report["findings"]], inputs


@pytest.mark.parametrize(
    ("target", "draft", "method", "n"),
    [
        (LLAMA, "eagle3-llama31-8b-target-quant-config", "eagle3", 3),  # findings to compare (MTP002)
        (LLAMA, "dflash-llama31-8b", "dflash", 7),
        (LLAMA, "dspark-llama31-8b-no-d2t", "dspark", 5),  # MTP008 + MTP005
        (LLAMA, "llama32-1b-instruct-head-dropped", "draft_model", 4),  # MTP004
        ("gemma4-26b-a4b-bf16", "gemma4-26b-a4b-assistant", "mtp", 4),  # no method: vLLM resolves mtp
    ],
)
def test_a_serve_commands_draft_lints_as_the_draft_option(target, draft, method, n):
    t, d = str(cached_build(target)), str(cached_build(draft))
    rc_a, by_options = _lint(t, "--draft", d, "--method", method, "-n", str(n))
    # No method in the command: the one vLLM resolves from the name as written is the one above.
    rc_b, by_command = _serve(t, {"model": d, "num_speculative_tokens": n})
    assert by_command["inputs"]["method"] == method
    assert by_command["inputs"]["num_speculative_tokens"] == n
    assert (rc_a, _summary(by_options)) == (rc_b, _summary(by_command))


@pytest.fixture
def plain_dir():
    # Not under pytest's tmp_path: it is named after the test, and vLLM reads the whole path.
    d = Path(tempfile.mkdtemp(prefix="mtplint-plain-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_a_drafter_head_under_a_plain_name_is_served_as_a_draft_model(plain_dir):
    # vllm #51338: no method, no "dflash" in the name: vLLM serves it as an independent draft model.
    target = str(cached_build(LLAMA))
    plain = plain_dir / "my-draft"
    plain.symlink_to(cached_build("dflash-llama31-8b"), target_is_directory=True)
    rc, report = _serve(target, {"model": str(plain), "num_speculative_tokens": 7})
    assert rc == 1 and report["inputs"]["method"] == "draft_model"
    mtp026 = [f for f in report["findings"] if f["code"] == "MTP026"]
    assert len(mtp026) == 1 and mtp026[0]["severity"] == "error"
    assert "resolves the speculative method draft_model" in mtp026[0]["message"]
    assert '"method": "dflash"' in mtp026[0]["message"]
    # Named, the same head is a DFlash draft, clean.
    rc, report = _serve(target, {"method": "dflash", "model": str(plain), "num_speculative_tokens": 7})
    assert (rc, report["inputs"]["method"], report["findings"]) == (0, "dflash", [])


def test_a_hub_draft_in_the_serve_command_reads_as_the_local_one(tmp_path):
    target, draft = str(cached_build(LLAMA)), cached_build("eagle3-llama31-8b-target-quant-config")
    _rc, local = _lint(target, "--draft", str(draft), "-n", "2")
    spec = json.dumps({"model": "org/eagle3", "num_speculative_tokens": 2})
    with HubServer() as hub:
        commit = hub.add("org/eagle3", draft)
        proc = hub_cli(
            hub, tmp_path / "home", "check", "--format", "json", "-q", "--", "vllm", "serve", target,
            "--speculative-config", spec,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    there = json.loads(proc.stdout)
    assert there["inputs"]["path"] == f"hf://org/eagle3@{commit}" and there["inputs"]["method"] == "eagle3"
    assert [(f["code"], f["message"]) for f in there["findings"]] == [
        (f["code"], f["message"]) for f in local["findings"]
    ]


def test_the_target_as_its_own_speculative_model_is_mtp_on_the_target():
    # The ERNIE-4.5 recipe: `{"method": "ernie_mtp", "model": <the served model>, ...}`.
    target = str(cached_build("ernie45-moe-bf16-official"))
    rc_a, plain = _lint(target, "-n", "1")
    spec = {"method": "ernie_mtp", "model": target, "num_speculative_tokens": 1}
    rc_b, served = _serve(target, spec, "--tensor-parallel-size", "8")
    assert "target" not in served["inputs"] and served["inputs"]["tensor_parallel_size"] == 8
    assert rc_a == rc_b == 0 and plain["findings"] == served["findings"] == []


def test_a_drafter_the_target_carries_named_by_its_method():
    target = str(cached_build("dsv4-flash-dspark-as-mtp"))
    rc_a, by_options = _lint(target, "--method", "dspark", "-n", "5", "--kv-cache-dtype", "fp8")
    rc_b, by_command = _serve(target, {"method": "dspark", "num_speculative_tokens": 5}, "--kv-cache-dtype", "fp8")
    assert (rc_a, _summary(by_options)) == (rc_b, _summary(by_command))


def test_a_speculative_model_vllm_reads_otherwise_is_refused_in_words(tmp_path):
    # Two speculative configs: mtplint's pre-read and vLLM's parser agree on the last one.
    target, draft = str(cached_build(LLAMA)), str(cached_build("eagle3-llama31-8b"))
    rc, report = _lint(
        "check", "--", "vllm", "serve", target, "--speculative-config", json.dumps({"model": "/nowhere"}),
        "--speculative-config", json.dumps({"model": draft, "num_speculative_tokens": 2}),
    )  # fmt: skip
    assert rc == 0 and report["inputs"]["method"] == "eagle3"
