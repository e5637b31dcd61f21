"""`--vllm-commit X` / `--vllm-source PATH` / `--vllm-python PATH` -> the interpreter the probe
runs, provisioning the environment on first use."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import click

from ..core.errors import BadInput
from . import fetch, provision, releases, source, store


@dataclass
class Target:
    python: str | None  # None: mtplint's own interpreter (the pinned release)
    wanted: str | None  # what the probed vLLM must report (check_vllm_commit)


def announce(quiet: bool) -> provision.Say | None:
    if quiet:
        return None
    return lambda msg: click.echo(f"mtplint: {msg}", err=True)


def probe_target(python: str | None, *, vllm_commit: str | None, vllm_source: str | Path | None, quiet: bool) -> Target:
    """python: --vllm-python as given (made absolute); it wins, and --vllm-commit is then
    only checked against it, as before. (The settings' fields, not the settings: this layer
    sits below lint/config/, which asks it for interpreters.)"""
    wanted = vllm_commit
    say = announce(quiet)
    if python:
        return Target(python, wanted)
    if vllm_source:
        checkout = source.source(Path(vllm_source), wanted or "HEAD", say=say)
        checkout.touch()
        return Target(str(checkout.python), None)
    if not wanted:
        if source.pinned_version() is not None:
            return Target(None, None)
        # Installed as a tool (no vLLM beside mtplint): the release it is tested against,
        # provisioned on first use like any other.
        env = release_env(releases.PINNED, say)
        return Target(str(env.python) if env else None, releases.PINNED)
    if releases.resolve(str(wanted)) is None and fetch.parse(str(wanted)) is not None:
        # Any other commit: fetched from vLLM's git repository, then provisioned like --vllm-source.
        provision.require_probe_base()
        env = fetch.fetched(str(wanted), say)
        env.touch()
        return Target(str(env.python), None)
    env = release_env(str(wanted), say)
    return Target(str(env.python) if env else None, wanted)


def release_env(x: str, say: provision.Say | None = None) -> store.Env | None:
    """The environment of release X (a version or a release's commit id); None for the
    pinned release, which is mtplint's own interpreter."""
    rel = releases.resolve(x)
    if rel is None:
        known = list(releases.table())
        raise BadInput(
            f"--vllm-commit {x}: not a vLLM release version, nor the commit of a release in mtplint's table "
            f"({known[0]} to {known[-1]}, scripts/refresh_release_table.py refreshes it), nor a commit id or "
            "BRANCH@YYYY-MM-DD of vLLM's git repository (fetched on demand). For a commit of a local checkout pass "
            "--vllm-source PATH; for a vLLM you installed yourself pass --vllm-python PATH to its interpreter"
        )
    if rel.version == source.pinned_version():
        return None
    provision.require_probe_base()
    env = provision.release(rel.version, rel.commit, say=say)
    env.touch()
    return env


def interpreter_path(python: str | Path | None) -> str | None:
    """--vllm-python as the probe child can run it from its own working directory: a path
    made absolute (not resolved: a venv's python is a symlink that must keep its name), a
    bare command looked up on PATH."""
    if not python:
        return None
    python = str(python)
    if os.sep in python:
        return os.path.abspath(python)
    return shutil.which(python) or python
