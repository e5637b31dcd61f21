"""`vllm serve`'s own argument checks before start-up, through the real probe: the pinned
release's `validate_parsed_serve_args` and `validate_api_server_args`
(lint/probe/child/serve_validation.py). A command vLLM refuses at start-up is refused (exit 2, in
vLLM's words); one it accepts lints as before; a chat template file or parser plugin that is
not on the linting machine is a step not checked (MTP025), never a refusal."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.probe, pytest.mark.slow]

SPEC = ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}']


@pytest.fixture(scope="module")
def ckpt() -> str:
    from fixtures.build import cached_build

    return str(cached_build("glm45-air-bf16-official"))


def _check(ckpt: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mtplint", "check", "--format", "json", "--", "vllm", "serve", ckpt, *SPEC, *flags],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--enable-auto-tool-choice"], "--enable-auto-tool-choice requires --tool-call-parser"),
        (["--enable-auto-tool-choice", "--tool-call-parser", "glm4_moe"], "invalid tool call parser: glm4_moe"),
    ],
)
def test_a_command_vllm_refuses_at_start_up_is_refused_in_its_words(ckpt, flags, said):
    run = _check(ckpt, *flags)
    assert run.returncode == 2, run.stdout + run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("mtplint: error: vllm serve command: vLLM 0.33.0 refuses it at start-up: ") and said in line
    assert "Traceback" not in run.stderr


def test_a_command_vllm_accepts_lints_clean(ckpt, tmp_path):
    template = tmp_path / "template.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    run = _check(ckpt, "--enable-auto-tool-choice", "--tool-call-parser", "glm45", "--chat-template", str(template))
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["findings"] == []


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--chat-template", "examples/tool_chat_template_glm45.jinja"], "--chat-template"),
        (
            [
                "--tool-parser-plugin",
                "/srv/plugins/my_parser.py",
                "--enable-auto-tool-choice",
                "--tool-call-parser",
                "mine",
            ],
            "--tool-parser-plugin",
        ),
    ],
)
def test_what_is_not_on_the_linting_machine_is_a_step_not_checked(ckpt, flags, flag):
    run = _check(ckpt, *flags)
    assert run.returncode == 0, run.stdout + run.stderr
    findings = json.loads(run.stdout)["findings"]
    assert [(f["code"], f["severity"]) for f in findings] == [("MTP025", "warning")], findings
    assert findings[0]["message"].startswith(flag)
