"""A checkpoint's own mtplint.toml is untrusted: it may describe the deployment (N, GPU,
TP/PP, KV-cache dtype) but never widen trust, pick an interpreter or hide findings. The same
keys from the user's project configuration or the command line are honoured (issue 16, item 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.config.settings import CHECKPOINT_KEYS, FILE_KEYS, load_settings, sources_line
from mtplint.core.errors import BadInput

from fixtures.build import cached_build

MTPLINT = [sys.executable, "-m", "mtplint"]
FINDINGS_RECIPE = "glm45-air-nvfp4-eh-proj-quantized"  # MTP002 + MTP003 errors, no remote code


def run(*args: str, cwd: Path, cache: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "MTPLINT_CACHE_DIR": str(cache)}
    return subprocess.run([*MTPLINT, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def copy_fixture(recipe: str, dest: Path) -> Path:
    subprocess.run(["cp", "-r", "--sparse=always", str(cached_build(recipe)), str(dest)], check=True)
    return dest


def last_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


# -- settings resolution, no probe ------------------------------------------------------------


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A working directory with a checkpoint directory inside it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt").mkdir()
    return tmp_path


FORBIDDEN = {
    "trust-remote-code": "true",
    "vllm-python": '"/bin/sh"',
    "vllm-commit": '"0.29.0"',
    "vllm-source": '"/tmp"',
    "select": '"MTP013"',
    "ignore": '"MTP"',
    "suppress": '[{id = "MTP001:re:.*mtp.*", reason = "accepted: see the release notes"}]',
    "fail-on": '"info"',
    "with-patches": '"draft-unquantized-mtp-block"',
    "probe-timeout": "1",
    "probe-memory": '"1TiB"',
    # A serve command may say --trust-remote-code and picks every engine flag: the user's own.
    "serve-args-file": '"serve.sh"',
}


def test_every_file_key_is_either_allowed_or_tested_as_forbidden():
    assert set(FILE_KEYS) == set(CHECKPOINT_KEYS) | set(FORBIDDEN)


@pytest.mark.parametrize("key", sorted(FORBIDDEN))
def test_checkpoint_file_cannot_set(project, key):
    (project / "ckpt" / "mtplint.toml").write_text(f"num-speculative-tokens = 2\n{key} = {FORBIDDEN[key]}\n")
    with pytest.raises(BadInput) as exc:
        load_settings(Path("ckpt"), {})
    line = exc.value.one_line()
    assert line.startswith(str(Path("ckpt") / "mtplint.toml") + ": "), line
    assert key in line and "command line" in line and "pyproject.toml" in line, line
    assert "\n" not in line


@pytest.mark.parametrize("key", sorted(FORBIDDEN))
@pytest.mark.parametrize("where", ["mtplint.toml", "pyproject.toml"])
def test_project_file_can_set(project, key, where):
    body = f"{key} = {FORBIDDEN[key]}\n"
    (project / where).write_text(body if where == "mtplint.toml" else f"[tool.mtplint]\n{body}")
    (project / "serve.sh").write_text("vllm serve ./ckpt --tensor-parallel-size 2\n")  # serve-args-file's
    s = load_settings(Path("ckpt"), {}).lint
    name = FILE_KEYS[key]
    assert getattr(s, name) not in (None, False, (), 600.0, "error"), s
    assert list(s.settings_files) == [
        {
            "path": "./mtplint.toml" if where == "mtplint.toml" else "./pyproject.toml [tool.mtplint]",
            "source": "project",
        }
    ]


def test_checkpoint_file_sets_deploy_inputs_and_loses_to_project_and_command_line(project):
    (project / "ckpt" / "mtplint.toml").write_text(
        "num-speculative-tokens = 3\ntensor-parallel-size = 8\npipeline-parallel-size = 2\n"
        'kv-cache-dtype = "fp8"\ngpu = "b200"\n'
    )
    s = load_settings(Path("ckpt"), {}).lint
    assert (s.num_speculative_tokens, s.tensor_parallel_size, s.pipeline_parallel_size) == (3, 8, 2)
    assert (s.kv_cache_dtype, s.gpu, s.sm) == ("fp8", "b200", None)
    assert list(s.settings_files) == [{"path": str(Path("ckpt") / "mtplint.toml"), "source": "checkpoint"}]

    (project / "mtplint.toml").write_text('tensor-parallel-size = 4\nsm = "9.0"\nignore = "MTP013"\n')
    s = load_settings(Path("ckpt"), {"num_speculative_tokens": 2, "ignore_codes": "MTP001"}).lint
    assert s.num_speculative_tokens == 2  # command line over the checkpoint
    assert s.tensor_parallel_size == 4  # project over the checkpoint
    assert s.pipeline_parallel_size == 2  # only the checkpoint says
    assert (s.gpu, s.sm) == (None, "9.0")  # gpu and sm are one setting: the project's sm wins whole
    assert s.ignore == ("MTP001",)
    assert [f["source"] for f in s.settings_files] == ["project", "checkpoint"]
    line = sources_line(s)
    assert line == (
        f"mtplint: settings from ./mtplint.toml, {Path('ckpt') / 'mtplint.toml'} (checkpoint: deploy inputs only)"
    )


def test_running_inside_the_checkpoint_does_not_make_its_files_the_project(project, monkeypatch):
    ckpt = project / "ckpt"
    (ckpt / "mtplint.toml").write_text("trust-remote-code = true\n")
    monkeypatch.chdir(ckpt)
    with pytest.raises(BadInput, match="trust-remote-code cannot be set by the checkpoint"):
        load_settings(Path("."), {})
    (ckpt / "mtplint.toml").unlink()
    (ckpt / "pyproject.toml").write_text('[tool.mtplint]\nignore = "MTP"\n')
    with pytest.raises(BadInput, match="ignore cannot be set by the checkpoint"):
        load_settings(Path("."), {})
    (ckpt / "sub").mkdir()
    monkeypatch.chdir(ckpt / "sub")
    (ckpt / "sub" / "mtplint.toml").write_text('vllm-python = "/bin/sh"\n')
    with pytest.raises(BadInput, match="vllm-python cannot be set by the checkpoint"):
        load_settings(Path(".."), {})


@pytest.mark.parametrize(
    "body, needle",
    [
        ('num-speculative-tokens = "two"', "num-speculative-tokens must be an integer from 1 to 64"),
        ("tensor-parallel-size = 0", "tensor-parallel-size must be an integer"),
        ('gpu = ["h100"]', "gpu must be a non-empty string"),
        ("kv-cache-dtype = 8", "kv-cache-dtype must be a non-empty string"),
        ("a = " + "[" * 5000 + "]" * 5000, "nested too deeply"),
        ("num-speculative-tokens = 1" + "0" * 5000, "invalid TOML"),
        ('"\\u001b[2Jgpu" = 1', "'\\x1b[2Jgpu'"),
    ],
)
def test_bad_checkpoint_settings_are_one_line_bad_input(project, body, needle):
    (project / "ckpt" / "mtplint.toml").write_text(body + "\n")
    with pytest.raises(BadInput) as exc:
        load_settings(Path("ckpt"), {})
    line = exc.value.one_line()
    assert needle in line and "mtplint.toml" in line and "\x1b" not in line and "\n" not in line, line


@pytest.mark.parametrize("body", ['fail-on = "never"', 'probe-timeout = "soon"', 'trust-remote-code = "yes"'])
def test_bad_project_settings_are_bad_input(project, body):
    (project / "mtplint.toml").write_text(body + "\n")
    with pytest.raises(BadInput, match=body.split(" ")[0] + " must be"):
        load_settings(Path("ckpt"), {})


# -- the lint itself: what the refused keys would have done does not happen ------------------


def _mimo_with_marker(dest: Path, marker: Path) -> Path:
    """MiMo ships configuration code (auto_map); this copy's code leaves a marker when imported."""
    ckpt = copy_fixture("mimo-bf16", dest)
    with (ckpt / "configuration_mimo.py").open("a") as f:
        f.write(f"\nimport pathlib as _pathlib\n_pathlib.Path({str(marker)!r}).write_text('imported')\n")
    return ckpt


@pytest.mark.probe
def test_checkpoint_cannot_enable_remote_code(tmp_path):
    marker = tmp_path / "config-code-ran"
    ckpt = _mimo_with_marker(tmp_path / "ckpt", marker)
    (ckpt / "mtplint.toml").write_text("trust-remote-code = true\n")
    proc = run(str(ckpt), "--no-cache", cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 2, proc.stderr
    line = last_line(proc)
    assert "mtplint.toml" in line and "trust-remote-code" in line and "command line" in line, line
    assert not marker.exists()

    # The same key from the user's project configuration is honoured: the code runs (which
    # is also what makes the assertion above able to fail).
    (ckpt / "mtplint.toml").write_text("num-speculative-tokens = 1\n")
    (tmp_path / "mtplint.toml").write_text("trust-remote-code = true\n")
    proc = run(str(ckpt), "--no-cache", "--format", "json", cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text() == "imported"
    assert f"mtplint: settings from ./mtplint.toml, {ckpt / 'mtplint.toml'} (checkpoint: deploy inputs only)" in (
        proc.stderr
    )
    assert json.loads(proc.stdout)["inputs"]["settings_files"] == [
        {"path": "./mtplint.toml", "source": "project"},
        {"path": str(ckpt / "mtplint.toml"), "source": "checkpoint"},
    ]


@pytest.fixture(scope="module")
def findings_ckpt(tmp_path_factory) -> tuple[Path, Path, dict]:
    """A checkpoint with errors, linted once with no settings files (exit 1); the cache is warm after."""
    root = tmp_path_factory.mktemp("settings-findings")
    ckpt = copy_fixture(FINDINGS_RECIPE, root / "ckpt")
    cache = root / "cache"
    proc = run(str(ckpt), "--format", "json", "-q", cwd=root, cache=cache)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["error"] > 0 and report["inputs"]["settings_files"] == []
    return ckpt, cache, report


@pytest.mark.probe
def test_checkpoint_cannot_pick_the_interpreter(findings_ckpt, tmp_path):
    ckpt, cache, _ = findings_ckpt
    marker = tmp_path / "interpreter-ran"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho ran > "{marker}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    (ckpt / "mtplint.toml").write_text(f'vllm-python = "{python}"\n')
    try:
        proc = run(str(ckpt), cwd=tmp_path, cache=cache)
        assert proc.returncode == 2, proc.stderr
        assert "vllm-python" in last_line(proc) and "mtplint.toml" in last_line(proc)
        assert not marker.exists()

        (ckpt / "mtplint.toml").unlink()
        (tmp_path / "pyproject.toml").write_text(f'[tool.mtplint]\nvllm-python = "{python}"\n')
        proc = run(str(ckpt), "-q", cwd=tmp_path, cache=cache)
        assert proc.returncode == 1, proc.stderr
        assert marker.read_text() == "ran\n"
        assert "settings from" not in proc.stderr  # -q
    finally:
        (ckpt / "mtplint.toml").unlink(missing_ok=True)


@pytest.mark.probe
def test_checkpoint_cannot_hide_findings(findings_ckpt, tmp_path):
    ckpt, cache, baseline = findings_ckpt
    (ckpt / "mtplint.toml").write_text('ignore = "MTP"\n')
    try:
        proc = run(str(ckpt), cwd=tmp_path, cache=cache)
        assert proc.returncode == 2, proc.stderr
        assert "ignore" in last_line(proc)

        (ckpt / "mtplint.toml").write_text("num-speculative-tokens = 1\n")  # allowed, and the default
        (tmp_path / "mtplint.toml").write_text('ignore = "MTP"\n')
        proc = run(str(ckpt), "--format", "json", cwd=tmp_path, cache=cache)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["findings"] == [] and report["probe"]["cached"] is True
        assert baseline["findings"]
    finally:
        (ckpt / "mtplint.toml").unlink(missing_ok=True)
