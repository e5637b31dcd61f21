"""The probe's environment is mtplint's as started: a variable torch writes into os.environ
while mtplint validates a compressed-tensors config must not reach the child, or the lint of
such a checkpoint would ask for another probe worker than any other lint."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mtplint.core import launch_env


def test_a_variable_an_import_wrote_is_dropped(monkeypatch):
    monkeypatch.setattr(launch_env, "AT_START", {"TORCHINDUCTOR_CACHE_DIR": None})
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_someone")
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "DEBUG")
    env = launch_env.child_environ()
    assert "TORCHINDUCTOR_CACHE_DIR" not in env and env["VLLM_LOGGING_LEVEL"] == "DEBUG"


def test_the_user_s_own_value_is_kept(monkeypatch):
    monkeypatch.setattr(launch_env, "AT_START", {"TORCHINDUCTOR_CACHE_DIR": "/scratch/inductor"})
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_someone")
    assert launch_env.child_environ()["TORCHINDUCTOR_CACHE_DIR"] == "/scratch/inductor"


@pytest.mark.slow  # imports torch
def test_torch_still_writes_it_so_the_guard_is_needed():
    """If torch stops writing the variable, this fails and the guard can go."""
    code = (
        "import os; from torch._inductor.runtime.cache_dir_utils import cache_dir; cache_dir(); "
        "print(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() not in ("", "None")


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "OPENAI_API_KEY",
        "WANDB_API_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "PGPASSWORD",
        "VLLM_API_KEY",
        "HF_HUB_TOKEN",
        "hf_token",
    ],
)
def test_a_credential_never_reaches_a_child_that_runs_checkpoint_code(monkeypatch, name):
    """Issue #37 item 2: not only the hub token and the cache secret (the probe, its workers and
    verify's engine all start from this environment)."""
    monkeypatch.setenv(name, "s3cr3t")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # a credential's word inside another is none
    env = launch_env.child_environ()
    assert name not in env and env["TOKENIZERS_PARALLELISM"] == "false"
