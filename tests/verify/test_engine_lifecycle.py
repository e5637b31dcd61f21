"""Issue #37, item 2: verify's engine gets the probe's scrubbed environment and dies with verify.

The real `mtplint verify` lints a fixture, builds its twin and starts the engine child
(lint/verify/engine_child.py) in the given engine Python, here this environment's own (vLLM
0.33.0): the test waits for that child, reads its environment from /proc, then SIGKILLs verify
(as the OOM killer would) and checks the engine is gone at once rather than running on until its
own timeout. The engine is caught while it imports torch and vLLM, seconds before it could fail
on a machine without a GPU, so what ends it is verify's death.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.build import cached_build

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the engine through /proc"),
    pytest.mark.probe,
    pytest.mark.slow,
]

SECRETS = {"HF_TOKEN": "hf_secret_for_the_hub", "MTPLINT_CACHE_SECRET": "seal-key-of-this-user"}


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _engine_of(pid: int) -> int | None:
    for child in _children(pid):
        try:
            if b"engine_child.py" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
        except OSError:
            continue
    return None


@pytest.fixture(scope="module")
def killed_verify(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("verify")
    env = {**os.environ, **SECRETS, "MTPLINT_CACHE_DIR": str(tmp / "cache")}
    cmd = [sys.executable, "-m", "mtplint", "verify", str(cached_build("mimo-bf16")), "--trust-remote-code"]
    cmd += ["--engine-python", sys.executable, "--engine-timeout", "600"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    engine = None
    deadline = time.monotonic() + 600
    try:
        while engine is None and proc.poll() is None and time.monotonic() < deadline:
            engine = _engine_of(proc.pid)
            time.sleep(0.02)
        assert engine is not None, f"verify never started its engine: {proc.stderr.read().decode()[-2000:]}"
        environ = Path(f"/proc/{engine}/environ").read_bytes().split(b"\0")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        gone_in = None
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3:
            if not _running(engine):
                gone_in = time.monotonic() - t0
                break
            time.sleep(0.02)
        return {"environ": {e.partition(b"=")[0].decode() for e in environ if e}, "gone_in": gone_in}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if engine is not None and _running(engine):
            os.kill(engine, signal.SIGKILL)


def test_the_engine_gets_no_secret(killed_verify):
    assert not set(SECRETS) & killed_verify["environ"]
    assert "PATH" in killed_verify["environ"]  # the environment was read: it is scrubbed, not empty


def test_the_engine_dies_with_a_sigkilled_verify(killed_verify):
    assert killed_verify["gone_in"] is not None, "the engine outlived verify by 3 s"
