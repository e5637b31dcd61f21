"""Probe workers (issue 11): vLLM imported once, a child forked per probe. The verdict never
depends on the worker; its children live and die like the cold child; it leaves when idle."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from mtplint.probe import workers
from test_probe_lifecycle import _gone_soon, _running, sigint_as_at_a_terminal

from fixtures.build import cached_build

CLEAN = "qwen35-bf16-official"
BROKEN = "glm45-air-ct-nvfp4-overbroad-mtp-ignore"


@pytest.fixture
def worker_dir():
    where = Path(tempfile.mkdtemp(prefix="mw-"))  # short: a socket's path is at most ~100 bytes
    yield where
    workers.stop_all(where)


def _env(worker_dir: Path, cache: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "MTPLINT_WORKER_DIR": str(worker_dir), "MTPLINT_CACHE_DIR": str(cache), **extra}


def _lint(checkpoint: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mtplint", str(checkpoint), "--no-cache", *args],
        capture_output=True,
        text=True,
        env={**env, "CI": "true"},  # the progress lines say whether a worker served the probe
    )


def _worker_pids(worker_dir: Path) -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if b"mtplint.probe.child.worker" in cmdline and str(worker_dir).encode() in cmdline:
                out.append(int(proc.name))
    return out


def _report(out: subprocess.CompletedProcess) -> dict:
    report = json.loads(out.stdout)
    return {"findings": report["findings"], "rules": report["rules_evaluated"], "vllm": report["vllm"]}


@pytest.mark.probe
def test_a_warm_worker_gives_the_cold_probes_verdict(worker_dir, tmp_path):
    checkpoint = cached_build(BROKEN)
    cold = _lint(checkpoint, _env(worker_dir, tmp_path, MTPLINT_WORKER_IDLE="0"), "--format", "json")
    assert "starting vLLM" in cold.stderr and not list(worker_dir.glob("*.sock"))
    first = _lint(checkpoint, _env(worker_dir, tmp_path), "--format", "json")
    assert "starting a vLLM worker" in first.stderr, first.stderr
    warm = _lint(checkpoint, _env(worker_dir, tmp_path), "--format", "json")
    assert "on a warm vLLM worker" in warm.stderr and "importing vLLM" not in warm.stderr, warm.stderr
    assert cold.returncode == first.returncode == warm.returncode == 1, cold.stderr
    assert _report(cold)["findings"], "the case must have findings for the comparison to mean anything"
    assert _report(warm) == _report(first) == _report(cold)


@pytest.mark.probe
def test_another_gpu_gets_another_worker_and_the_same_gpu_the_same(worker_dir, tmp_path):
    checkpoint = cached_build(CLEAN)
    env = _env(worker_dir, tmp_path)
    assert _lint(checkpoint, env).returncode == 0
    assert _lint(checkpoint, env, "--num-speculative-tokens", "2").returncode == 0
    assert len(list(worker_dir.glob("*.sock"))) == 1  # N is a request, not an import-time platform
    assert _lint(checkpoint, env, "--gpu", "b200").returncode == 0
    assert len(list(worker_dir.glob("*.sock"))) == 2
    listed = _env_workers(env)
    assert listed.returncode == 0 and "2 worker(s)" in listed.stdout, listed.stderr
    assert {ln.split()[1] for ln in listed.stdout.splitlines() if ln.startswith("pid ")} == {
        str(p) for p in _worker_pids(worker_dir)
    }
    assert "NVIDIA B200" in listed.stdout and "H100" in listed.stdout
    stopped = _env_workers(env, "--stop")
    assert "stopped 2 worker(s)" in stopped.stdout, stopped.stderr
    assert not list(worker_dir.glob("*.sock")) and "0 worker(s)" in _env_workers(env).stdout


def _env_workers(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mtplint", "env", "workers", *args], capture_output=True, text=True, env=env
    )


@pytest.mark.probe
def test_a_killed_mtplint_takes_its_forked_probe_along_and_the_worker_serves_on(worker_dir, tmp_path):
    checkpoint = cached_build("dsv4-flash-official")  # a probe long enough to be caught running
    env = _env(worker_dir, tmp_path)
    assert _lint(checkpoint, env).returncode == 0  # starts the worker
    (worker,) = _worker_pids(worker_dir)
    for signum, code in ((signal.SIGKILL, -9), (signal.SIGINT, 130)):
        proc = subprocess.Popen(
            [sys.executable, "-m", "mtplint", str(checkpoint), "--no-cache", "-q"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=sigint_as_at_a_terminal,
        )
        child = _forked_child(worker, proc)
        os.kill(proc.pid, signum)
        proc.communicate(timeout=60)
        assert proc.returncode == code
        assert _gone_soon(child, 5.0), f"the probe forked for a {signum.name}ed mtplint still runs"
        assert _running(worker)
    again = _lint(checkpoint, env)
    assert again.returncode == 0 and "on a warm vLLM worker" in again.stderr, again.stderr


def _forked_child(worker: int, client: subprocess.Popen) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert client.poll() is None, (time.monotonic() - deadline + 60, client.communicate())
        kids = _children(worker)
        if kids:
            time.sleep(1.0)  # into construction
            return kids[0]
        time.sleep(0.05)
    raise AssertionError("the worker forked no probe within 60 s")


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.probe
def test_an_idle_worker_leaves_and_takes_its_socket_along(worker_dir, tmp_path):
    env = _env(worker_dir, tmp_path, MTPLINT_WORKER_IDLE="1")
    assert _lint(cached_build(CLEAN), env).returncode == 0
    (worker,) = _worker_pids(worker_dir)
    assert _gone_soon(worker, 10.0)
    assert not list(worker_dir.glob("*.sock"))


@pytest.mark.probe
def test_a_worker_that_cannot_start_leaves_the_probe_to_a_cold_child(worker_dir, tmp_path):
    # An interpreter that runs everything but the worker: the lint must not notice.
    python = tmp_path / "python"
    python.write_text(
        f'#!/bin/sh\ncase "$*" in *mtplint.probe.child.worker*) echo "no worker here" >&2; exit 1;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    out = _lint(cached_build(CLEAN), _env(worker_dir, tmp_path), "--vllm-python", str(python))
    assert out.returncode == 0, out.stderr
    assert "starting vLLM" in out.stderr and not list(worker_dir.glob("*.sock"))


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_idle_time_is_a_usage_error(value, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mtplint", str(cached_build(CLEAN))],
        capture_output=True,
        text=True,
        env={**os.environ, "MTPLINT_WORKER_IDLE": value},
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"mtplint: error: MTPLINT_WORKER_IDLE must be a number of seconds >= 0 (0: no probe worker), not {value!r}"
    ]


def test_only_a_private_directory_of_ours_holds_sockets(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert workers._private_dir(shared)  # ours: made private
    assert stat.S_IMODE(shared.stat().st_mode) == 0o700
    link = tmp_path / "link"
    link.symlink_to(shared, target_is_directory=True)
    assert not workers._private_dir(link)
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert not workers._private_dir(blocked)


def test_a_long_cache_path_puts_the_sockets_in_the_temp_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(workers.DIR_ENV, raising=False)
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / ("x" * 120)))
    assert workers.root() == Path(tempfile.gettempdir()) / f"mtplint-{os.getuid()}-workers"
    monkeypatch.setenv("MTPLINT_CACHE_DIR", "/c")
    assert workers.root() == Path("/c/workers")


def test_the_least_recently_used_workers_make_room(tmp_path):
    socks = []
    for i in range(workers.MAX_WORKERS + 1):
        sock = tmp_path / f"{i}.sock"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(sock))
        s.close()  # nobody listens: a worker that is gone, whose name _stop clears
        os.utime(sock, (1000 + i, 1000 + i))
        socks.append(sock)
    new = tmp_path / "new.sock"
    workers._make_room(tmp_path, keep=new)
    left = sorted(p.name for p in tmp_path.glob("*.sock"))
    assert left == [s.name for s in socks[-(workers.MAX_WORKERS - 1) :]]


def test_the_worker_key_follows_what_imports_read_and_nothing_per_probe(tmp_path):
    package = Path(workers.__file__).resolve().parent.parent
    identity = {"version": "0.33.0", "commit": "abc"}
    platform = {"sm": [9, 0], "gpu_name": "H100", "gpu_memory": 1, "gpus": 8}
    base = {"HOME": "/root", "VLLM_LOGGING_LEVEL": "WARNING", "PATH": "/bin"}
    k = workers.key(sys.executable, identity, platform, base, package)
    per_probe = {**base, "MTPLINT_PROBE_TENSORS": "/t/x", "TMPDIR": "/t", "PYTEST_CURRENT_TEST": "x", "PATH": "/x"}
    assert workers.key(sys.executable, identity, platform, per_probe, package) == k
    assert workers.key(sys.executable, identity, platform, {**base, "HF_HOME": "/h"}, package) != k
    assert workers.key(sys.executable, identity, {**platform, "sm": [10, 0]}, base, package) != k
    assert workers.key(sys.executable, {**identity, "version": "0.31.0"}, platform, base, package) != k
