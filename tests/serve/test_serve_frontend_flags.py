"""Serve flags that do not change what vLLM builds or loads never change the verdict.

Reasoning and tool parsers, chat templates, host, port, served names, API keys, logging and
the other API server options: the lint of a serve command with all of them equals the lint
without them, through the real probe. The reasoning parser is built over the tokenizer the
checkpoint ships (vLLM does it while creating the engine config); where the probe has no
tokenizer to read, MTP025 says so and nothing else changes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MTPLINT = [sys.executable, "-m", "mtplint"]
# A firing layout (one MTP001), so the comparison has findings to compare.
RECIPE = "qwen35-awq-autoround-shard-names-one-dead"
SPEC = ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}']
SECRET = "sk-mtplint-test-SECRET-7f3a"


def _frontend(tmp_path: Path) -> list[str]:
    template = tmp_path / "template.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    return [
        "--host", "0.0.0.0",
        "--port", "8001",
        "--served-model-name", "my-model",
        "--api-key", SECRET,
        "--chat-template", str(template),
        "--chat-template-content-format", "string",
        "--response-role", "assistant",
        "--enable-auto-tool-choice",
        "--tool-call-parser", "qwen3_coder",
        "--reasoning-parser", "qwen3",
        "--uvicorn-log-level", "warning",
        "--disable-uvicorn-access-log",
        "--disable-fastapi-docs",
        "--allowed-origins", '["*"]',
        "--root-path", "/v1",
        "--max-log-len", "100",
        "--enable-prompt-tokens-details",
        "--default-chat-template-kwargs", '{"enable_thinking": false}',
    ]  # fmt: skip


def _lint(path: str, flags: list[str], out: Path, *cache: str) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [
            *MTPLINT,
            "check",
            "--format",
            "json",
            "--output",
            str(out),
            "-q",
            *cache,
            "--",
            "vllm",
            "serve",
            path,
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(out.read_text()), proc.stdout + proc.stderr + out.read_text()


def _findings(report: dict) -> list[tuple[str, str, str]]:
    return [(f["code"], f["severity"], f["message"]) for f in report["findings"]]


@pytest.mark.probe
@pytest.mark.slow
def test_frontend_flags_do_not_change_the_verdict(tmp_path):
    from fixtures.build import cached_build

    path = str(cached_build(RECIPE))
    rc_plain, plain, _ = _lint(path, SPEC, tmp_path / "plain.json")
    rc_full, full, said = _lint(path, [*SPEC, *_frontend(tmp_path)], tmp_path / "full.json")
    assert plain["findings"], "the layout has a finding to compare"
    assert (rc_full, _findings(full)) == (rc_plain, _findings(plain))
    assert SECRET not in said  # an API key never reaches the output


@pytest.mark.probe
@pytest.mark.slow
def test_a_tokenizer_added_later_is_read_by_the_next_lint(tmp_path):
    """A copy without its tokenizer: the parser is not checked (MTP025); once the tokenizer
    files are there, the next lint (remembered verdicts on) builds the parser over them."""
    from fixtures.build import build, cached_build

    ckpt = build("glm47-bf16-no-tokenizer", tmp_path / "ckpt")  # its own copy: the test writes to it
    flags = [*SPEC, "--reasoning-parser", "glm45"]
    # The text report, as a user reads it: a lint whose findings can be remembered (verdict_cache).
    before = _lint_text(str(ckpt), flags)
    assert "MTP025" in before and "ships no tokenizer" in before
    official = cached_build("glm47-bf16-official")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(official / name, ckpt / name)
    after = _lint_text(str(ckpt), flags)
    assert "no findings" in after and "MTP025" not in after, after


def _lint_text(path: str, flags: list[str]) -> str:
    proc = subprocess.run(
        [*MTPLINT, "check", "--", "vllm", "serve", path, *flags], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.probe
@pytest.mark.slow
def test_a_tokenizer_needing_a_package_the_probe_lacks_is_not_an_error(tmp_path):
    """A remote-code tokenizer (tokenizer_config.json's auto_map) that imports a package the
    probe's interpreter lacks: transformers refuses to load it here, which says nothing about
    the checkpoint. The parser is left out (MTP025 naming the package), the rest is linted."""
    from fixtures.build import build

    ckpt = build("glm47-bf16-official", tmp_path / "ckpt")
    config = json.loads((ckpt / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "ShippedTokenizer"
    config["auto_map"] = {"AutoTokenizer": [None, "tokenization_shipped.ShippedTokenizer"]}
    (ckpt / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (ckpt / "tokenization_shipped.py").write_text(
        "import mtplint_absent_tokenizer_dependency\n\n"
        "from transformers import PreTrainedTokenizerFast\n\n\n"
        "class ShippedTokenizer(PreTrainedTokenizerFast):\n    pass\n"
    )
    flags = [*SPEC, "--reasoning-parser", "glm45", "--trust-remote-code"]
    rc, report, _ = _lint(str(ckpt), flags, tmp_path / "report.json", "--no-cache")
    assert rc == 0
    assert [f["code"] for f in report["findings"]] == ["MTP025"]
    assert "needs mtplint_absent_tokenizer_dependency" in report["findings"][0]["message"]


@pytest.mark.probe
@pytest.mark.slow
def test_a_tower_the_deployment_does_not_build_is_not_unconsumed(tmp_path):
    """`--language-model-only` (GLM-OCR's recipe, text_only): vLLM builds the vision tower as a
    StageMissingLayer and its loader passes the tower's tensors over by design, so they are not
    MTP013 "consumed by nothing" (they were, for all 5 groups of the tower); the same layout
    served with its tower reads them all."""
    from fixtures.build import cached_build

    path = str(cached_build("glm-ocr-bf16-official"))
    flags = ["--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "1"]
    rc, text_only, _ = _lint(path, [*flags, "--language-model-only"], tmp_path / "text.json")
    assert (rc, _findings(text_only)) == (0, [])
    rc, full, _ = _lint(path, flags, tmp_path / "full.json")
    assert (rc, _findings(full)) == (0, [])
