"""Issue #37, item 6: the fuzz sample extended to serve commands and --serve-args-file.

Generated `vllm serve` commands (the flags mtplint reads before probing, values of every shape,
JSON nested from flat to thousands of levels) and generated serve-args files (text and raw bytes)
go through load_settings as the command line gives them: the outcome is settings or BadInput,
never another exception; an accepted file holds a command, an accepted command's nesting is
within the limit. Derandomized, so a failure reproduces.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mtplint.config.settings import load_settings
from mtplint.core.errors import BadInput

FUZZ = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

FLAGS = [
    "--speculative-config",
    "-sc",
    "--speculative-config.method",
    "--speculative-config.num_speculative_tokens",
    "--tensor-parallel-size",
    "-tp",
    "--pipeline-parallel-size",
    "--kv-cache-dtype",
    "--trust-remote-code",
    "--hf-overrides",
    "--max-model-len",
    "--port",
]

_json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
_json = st.recursive(
    _json_leaf,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
    max_leaves=12,
)


@st.composite
def _nested(draw) -> str:
    """A speculative config, its values of any JSON shape, sometimes wrapped in brackets up to
    thousands of levels deep (Python's json gives up near 1,000)."""
    spec = {"method": draw(st.sampled_from(["mtp", "deepseek_mtp", "eagle3", 1, None])), "x": draw(_json)}
    n = draw(st.integers(1, 10)) if draw(st.booleans()) else 0
    if draw(st.integers(0, 4)) == 0:
        spec["num_speculative_tokens"] = draw(st.integers(-2, 9) | st.text(max_size=3))
    text = json.dumps(spec)
    depth = draw(st.sampled_from([0, 0, 1, 63, 64, 65, 900, 1100, 5000])) + n
    if depth > n:
        inner = "[" * depth + "]" * depth
        text = text[:-1] + ', "deep": ' + inner + "}"
    return text


_value = _nested() | st.text(max_size=12) | st.integers(-5, 99).map(str) | _json.map(json.dumps)


@st.composite
def _command(draw) -> list[str]:
    tokens: list[str] = draw(st.sampled_from([["vllm", "serve", "org/m"], ["serve"], [], ["org/m"]]))
    for _ in range(draw(st.integers(0, 5))):
        flag = draw(st.sampled_from(FLAGS) | st.text(min_size=1, max_size=6).map(lambda s: "--" + s))
        if draw(st.booleans()):
            tokens += [flag, draw(_value)]
        elif draw(st.booleans()):
            tokens.append(f"{flag}={draw(_value)}")
        else:
            tokens.append(flag)
    return tokens


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ckpt")
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return root


def _load(ckpt: Path, given: dict) -> object:
    try:
        return load_settings(ckpt, given)
    except BadInput as exc:
        line = exc.one_line()
        assert "\n" not in line and len(line) < 2000, line
        return exc


@pytest.mark.slow
@FUZZ
@given(tokens=_command())
def test_generated_serve_commands_are_settings_or_bad_input(ckpt, tokens):
    out = _load(ckpt, {"serve_command": tokens})
    if not isinstance(out, BadInput):
        assert max(map(_brackets, tokens), default=0) <= 64 + 10, "a command nested past the limit was accepted"


def _brackets(token: str) -> int:
    """Nesting depth by brackets (JSON strings not told apart: the generated ones hold few)."""
    depth = deepest = 0
    for ch in token:
        depth += (ch in "[{") - (ch in "]}")
        deepest = max(deepest, depth)
    return deepest


@pytest.mark.slow
@FUZZ
@given(tokens=_command(), raw=st.binary(max_size=64), kind=st.sampled_from(["command", "bytes", "blank"]))
def test_generated_serve_args_files_are_settings_or_bad_input(ckpt, tmp_path_factory, tokens, raw, kind):
    path = tmp_path_factory.mktemp("serve") / "serve.sh"
    if kind == "command":
        path.write_text(" \\\n  ".join(shlex.quote(t) for t in tokens) + "\n")
    elif kind == "bytes":
        path.write_bytes(raw)
    else:
        path.write_text(raw.decode("latin-1").translate({c: None for c in range(33, 256)}))  # whitespace only
    out = _load(ckpt, {"serve_args_file": str(path)})
    if not isinstance(out, BadInput):
        text = path.read_bytes().decode("utf-8")
        assert shlex.split(text.replace("\\\n", " "), comments=True), "an empty file was accepted"
    elif kind == "blank":
        assert "holds no vllm serve command" in out.one_line()
