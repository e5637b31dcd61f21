"""The README's tool install, for real: mtplint's wheel in a fresh virtual environment with its
`probe` extra, no vLLM beside it; the first lint provisions the pinned vLLM into the
environment store and probes through it (issue 15)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from fixtures.build import cached_build

pytestmark = pytest.mark.probe  # installs ~70 packages and runs the real probe: minutes


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1200, **kw)


@pytest.fixture(scope="module")
def tool(tmp_path_factory) -> Path:
    """bin/ of a fresh venv holding mtplint[probe] installed from a wheel built from this tree."""
    base = tmp_path_factory.mktemp("tool")
    wheels = base / "dist"
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)]
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("mtplint-*.whl")
    venv = base / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # torch resolves to the CPU build through this machine's pip configuration (a local wheel
    # directory); elsewhere the README adds PyTorch's CPU index.
    installed = _run([*pip, f"{wheel}[probe]"])
    assert installed.returncode == 0, installed.stderr[-2000:]
    return venv / "bin"


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTPLINT_") and k != "PYTHONPATH"}
    return {**env, "MTPLINT_ENVS_DIR": str(tmp / "envs"), "MTPLINT_CACHE_DIR": str(tmp / "cache")}


def test_the_wheel_carries_no_vllm_and_the_probe_extra(tool):
    probe = _run([str(tool / "python"), "-c", "import importlib.util as u; print(u.find_spec('vllm') is None)"])
    assert probe.stdout.strip() == "True"
    extra = _run(
        [str(tool / "python"), "-c", "from mtplint.envs.provision import missing_probe_requirements as m; print(m())"]
    )
    assert extra.stdout.strip() == "[]", extra.stderr


def test_first_lint_provisions_the_pinned_vllm_and_lints(tool, tmp_path):
    checkpoint = cached_build("dsv4-flash-w4a16-bf16mtp")  # the demo: MTP001 and its consequences
    env = _env(tmp_path)
    first = _run([str(tool / "mtplint"), str(checkpoint), "--format", "json", "--output-format", "concise"], env=env)
    assert first.returncode == 1, first.stderr[-3000:]
    report = json.loads(first.stdout)
    assert report["vllm"]["version"] == "0.33.0"
    assert "MTP001" in {f["code"] for f in report["findings"]}
    assert "provisioning vLLM 0.33.0" in first.stderr
    listed = _run([str(tool / "mtplint"), "env", "list"], env=env)
    assert listed.returncode == 0
    assert "0.33.0" in listed.stdout and "not beside mtplint" in listed.stdout
    again = _run([str(tool / "mtplint"), str(checkpoint), "-q"], env=env)  # provisioned and cached: no reinstall
    assert again.returncode == 1 and "provisioning" not in again.stderr


def test_without_the_probe_extra_it_says_what_to_install(tool, tmp_path):
    # A package of the extra gone (as in a plain `pip install mtplint`): one line, exit 2, before any install.
    pip = [str(tool / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    assert _run([*pip, "uninstall", "-y", "xgrammar"]).returncode == 0
    try:
        checkpoint = cached_build("dsv4-flash-w4a16-bf16mtp")
        out = _run([str(tool / "mtplint"), str(checkpoint)], env=_env(tmp_path))
        assert out.returncode == 2, out.stderr
        line = out.stderr.strip().splitlines()[-1]
        assert "xgrammar" in line and "mtplint[probe]" in line and "Traceback" not in out.stderr
        assert not (tmp_path / "envs" / "0.33.0").exists()
    finally:
        assert _run([*pip, "install", "xgrammar==0.2.8"]).returncode == 0
