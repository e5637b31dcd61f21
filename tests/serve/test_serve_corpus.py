"""Published `vllm serve` commands, each linted as published against a fixture of its family.

tests/serve_corpus/<id>.toml holds one command exactly as its source published it (a vLLM
recipe, a model card, an issue), the fixture recipe standing for each model id it names, the
flag classes it covers and what vLLM does with it:

    id = "glm45-air-recipe-mtp"                 # = the file's name
    source = "https://github.com/.../GLM.md"    # where it was published (commit-pinned where possible)
    published = '''vllm serve zai-org/GLM-4.5-Air --speculative-config ...'''
    models = { "zai-org/GLM-4.5-Air" = "glm45-air-bf16-official" }
    classes = ["reasoning-parser", "tool-parser"]
    expect_exit = 0       # 0 lints clean; 2 vLLM's parser rejects it; 1 vLLM's config validation does
    expect_message = ""   # optional: text the output must hold

The command is read as a shell reads it (backslash-newline continuations, quotes; leading
`NAME=VALUE` environment assignments and a launcher before `vllm serve` are not vLLM's
arguments). Every occurrence of a model id (the positional model, `--model`, a "model" inside
--speculative-config) becomes the built fixture's path; nothing else is changed. Each entry is
one real-probe case: `make test` runs a fixed sample (the first entry of each class),
`make test-corpus` (MTPLINT_SERVE_CORPUS=all) runs all of them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from paths import TESTS

CORPUS_DIR = TESTS / "serve_corpus"
KEYS: dict[str, type] = {
    "id": str,
    "source": str,
    "published": str,
    "models": dict,
    "classes": list,
    "expect_exit": int,
    "expect_message": str,
}
REQUIRED = ("id", "source", "published", "models", "classes", "expect_exit")
EXITS = (0, 1, 2)
_CLASS = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class CorpusError(ValueError):
    pass


def validate(entry: Any, where: str) -> None:
    """An entry as tests/serve_corpus/*.toml must write it; CorpusError naming the file and key."""
    _check_shape(entry, where)
    _check_values(entry, where)


def _check_shape(entry: Any, where: str) -> None:
    if not isinstance(entry, dict):
        raise CorpusError(f"{where}: not a table")
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        raise CorpusError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(KEYS)}")
    missing = [k for k in REQUIRED if k not in entry]
    if missing:
        raise CorpusError(f"{where}: missing {', '.join(missing)}")
    for key, value in entry.items():
        if not isinstance(value, KEYS[key]) or isinstance(value, bool):
            raise CorpusError(f"{where}: {key} must be a {KEYS[key].__name__}, not {type(value).__name__}")


def _check_values(entry: dict[str, Any], where: str) -> None:
    from fixtures.build import list_recipes

    problems = [
        (entry["id"] != Path(where).stem, f"id {entry['id']!r} is not the file's name"),
        (not entry["source"].startswith("https://"), "source must be the https address it was published at"),
        (entry["expect_exit"] not in EXITS, f"expect_exit must be one of {EXITS}"),
        (
            not entry["classes"] or not all(isinstance(c, str) and _CLASS.match(c) for c in entry["classes"]),
            "classes must be a non-empty list of kebab-case flag classes",
        ),
        (not entry["models"], "models must map each model id of the command to a fixture recipe"),
    ]
    recipes = set(list_recipes())
    problems += [
        (recipe not in recipes, f"models[{model!r}] = {recipe!r} is not a fixture recipe")
        for model, recipe in entry["models"].items()
    ]
    for failed, message in problems:
        if failed:
            raise CorpusError(f"{where}: {message}")
    argv = command(entry["published"], where)
    if served_model(argv) not in entry["models"]:
        raise CorpusError(f"{where}: the served model {served_model(argv)!r} has no fixture in `models`")


def command(published: str, where: str) -> list[str]:
    """`vllm serve ...` as a shell passes it to vllm: continuations joined, quotes removed,
    environment assignments and a launcher before `vllm` dropped."""
    try:
        words = shlex.split(published.replace("\\\n", " "))
    except ValueError as exc:
        raise CorpusError(f"{where}: published is not a shell command: {exc}") from None
    for i in range(len(words) - 1):
        if words[i] == "vllm" and words[i + 1] == "serve":
            argv = words[i:]  # what precedes (`NAME=VALUE`, a launcher) is not vLLM's
            if served_model(argv) is None:
                raise CorpusError(f"{where}: the command names no model (after `vllm serve`, or as --model)")
            return argv
    raise CorpusError(f"{where}: published holds no `vllm serve` command")


def served_model(argv: list[str]) -> str | None:
    """The model `vllm serve` serves: its positional argument, else `--model X` / `--model=X`."""
    if len(argv) > 2 and not argv[2].startswith("-"):
        return argv[2]
    for i, word in enumerate(argv):
        if word == "--model" and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith("--model="):
            return word.removeprefix("--model=")
    return None


def substituted(argv: list[str], paths: dict[str, str]) -> list[str]:
    """Every occurrence of a model id replaced by its fixture's path: a whole argument, the
    value of `--flag=ID`, or a JSON string inside a config flag ("model": "ID")."""
    out = []
    for word in argv:
        for model, path in paths.items():
            if word == model:
                word = path
            elif word.endswith(f"={model}"):
                word = word[: -len(model)] + path
            elif f'"{model}"' in word:
                word = word.replace(f'"{model}"', json.dumps(path))
        out.append(word)
    return out


def load_corpus() -> list[dict[str, Any]]:
    entries = []
    for f in sorted(CORPUS_DIR.glob("*.toml")):
        entry = tomllib.loads(f.read_text())
        validate(entry, f.name)
        entries.append(entry)
    return entries


def sample(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries `make test` runs: the first (by id) of each flag class, so every class is
    exercised on every run (about one entry per class) and the same ones each time."""
    chosen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        for cls in entry["classes"]:
            if cls not in {c for e in chosen.values() for c in e["classes"]}:
                chosen[entry["id"]] = entry
    return list(chosen.values())


def _params() -> list[Any]:
    entries = load_corpus()
    chosen = entries if os.environ.get("MTPLINT_SERVE_CORPUS") == "all" else sample(entries)
    return [pytest.param(e, id=e["id"]) for e in chosen]


def test_every_entry_is_well_formed():
    entries = load_corpus()
    assert len({e["id"] for e in entries}) == len(entries)
    assert entries, "the corpus is empty"


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"expected_exit": 0}, "unknown key(s) expected_exit"),
        ({"models": {"zai-org/GLM-4.5-Air": "no-such-recipe"}}, "is not a fixture recipe"),
        ({"expect_exit": 3}, "expect_exit must be one of"),
        ({"published": "vllm serve --port 8000"}, "names no model"),
        ({"published": "python -m vllm.entrypoints.openai.api_server"}, "no `vllm serve` command"),
        ({"classes": ["Reasoning Parser"]}, "kebab-case"),
        ({"id": "another-name"}, "is not the file's name"),
    ],
)
def test_a_malformed_entry_is_refused(change, needle):
    entry = {
        "id": "x",
        "source": "https://example.org/recipe.md",
        "published": "vllm serve zai-org/GLM-4.5-Air --reasoning-parser glm45",
        "models": {"zai-org/GLM-4.5-Air": "glm45-air-bf16-official"},
        "classes": ["reasoning-parser"],
        "expect_exit": 0,
    }
    with pytest.raises(CorpusError, match=re.escape(needle)):
        validate({**entry, **change}, "x.toml")


def test_the_command_is_read_as_a_shell_reads_it():
    published = (
        "VLLM_DEEP_GEMM_WARMUP=skip vllm serve org/M \\\n"
        '  --speculative-config \'{"method": "mtp", "model": "org/M"}\' \\\n'
        "  --model=org/M --served-model-name org/M-fp8"
    )
    argv = substituted(command(published, "x"), {"org/M": "/fx/m"})
    assert argv == [
        "vllm",
        "serve",
        "/fx/m",
        "--speculative-config",
        '{"method": "mtp", "model": "/fx/m"}',
        "--model=/fx/m",
        "--served-model-name",
        "org/M-fp8",
    ]


def test_the_sample_covers_every_class():
    entries = load_corpus()
    every = {c for e in entries for c in e["classes"]}
    assert {c for e in sample(entries) for c in e["classes"]} == every


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.parametrize("entry", _params())
def test_published_command_lints_as_vllm_judges_it(entry, tmp_path):
    from fixtures.build import cached_build

    paths = {model: str(cached_build(recipe)) for model, recipe in entry["models"].items()}
    argv = substituted(command(entry["published"], entry["id"]), paths)
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", "check", "--format", "json", "--output", str(out), "-q", "--", *argv],
        capture_output=True,
        text=True,
        timeout=900,
    )
    said = proc.stdout + proc.stderr + (out.read_text() if out.exists() else "")
    findings = json.loads(out.read_text())["findings"] if out.exists() else []
    shown = [f"{f['code']} {f['severity']}: {f['message'][:300]}" for f in findings] or [proc.stderr[-2000:]]
    assert proc.returncode == entry["expect_exit"], "\n".join(shown)
    if entry["expect_exit"] == 2:
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    if entry.get("expect_message"):
        assert entry["expect_message"] in said, "\n".join(shown)
