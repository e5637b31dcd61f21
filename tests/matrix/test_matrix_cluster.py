"""`mtplint matrix PATH... --cluster ADDRESS` on a real Ray cluster started here (tests/support/ray_cluster.py:
`ray start --head` plus a second node process, both on 127.0.0.1, one CPU each, dashboard and
usage statistics off), stopped when the module ends. The catalogue is three cheap checkpoints
(Qwen3.5 BF16 as published, Qwen3.5 advertising an MTP layer it does not ship, GLM-4.5-Air
without its MTP layer) x the pinned vLLM 0.33.0 and 0.29.0 (provisioned into build/envs on first
use, ~45 s) x n = 1, 2: twelve cells. The cluster's verdicts are compared with the local pool's,
cell for cell; a Ray worker killed mid-cell and a Ctrl-C mid-run are checked on the processes
themselves. `make test` runs the whole tier (138 s here, up to ~6 min under load); `make test-cluster` runs it alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from ray_cluster import RayCluster, cluster_env

from fixtures.build import cached_build

pytestmark = pytest.mark.cluster

MTPLINT = [sys.executable, "-m", "mtplint"]
RECIPES = ("qwen35-bf16-official", "qwen35-mtp-advertised-not-shipped", "glm45-air-mtp-dropped")
RELEASES = "0.29.0,0.33.0"
SECRET = "cache-secret-5b1f0c7e9d2a4f68"
TOKEN = "hf_CLUSTERtoken0a1b2c3d4e5f"


@pytest.fixture(scope="module")
def checkpoints() -> list[str]:
    from recorded_cases import release_env

    release_env("0.29.0")  # provisioned once, before any node or pool races to it
    return [str(cached_build(r)) for r in RECIPES]


@pytest.fixture(scope="module")
def cluster():
    """Two nodes whose own environment holds no secret: no MTPLINT_CACHE_SECRET, no HF_TOKEN, and
    a config home with no cache-secret file (so a node caches nothing unless a driver hands it
    the secret through Ray's runtime environment). Their probe workers live in a directory of
    their own, stopped with the cluster."""
    from mtplint.probe.workers import stop_all

    home = Path(tempfile.mkdtemp(prefix="mtplint-cluster-"))
    workers = Path(tempfile.mkdtemp(prefix="mtw-", dir="/tmp"))
    env = cluster_env(
        {
            "MTPLINT_CACHE_DIR": str(home / "cache"),
            "XDG_CONFIG_HOME": str(home / "config"),
            "MTPLINT_WORKER_DIR": str(workers),
        }
    )
    (home / "config").mkdir()
    (home / "config").chmod(0o500)  # no cache-secret file can be created there
    ray = RayCluster(env)
    try:
        ray.start()
        yield ray
    finally:
        ray.stop()
        stop_all(workers)
        left = ray.processes()
        (home / "config").chmod(0o700)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(workers, ignore_errors=True)
        assert left == [], f"cluster processes left running: {left}"


def _driver_env(cluster: RayCluster, tmp: Path, **extra: str) -> dict[str, str]:
    env = {**cluster.env, "MTPLINT_CACHE_DIR": str(tmp / "driver-cache"), "CI": "1", **extra}
    env.pop("XDG_CONFIG_HOME", None)
    return env


def _matrix(paths: list[str], *more: str) -> list[str]:
    return [*MTPLINT, "matrix", *paths, "--vllm-commit", RELEASES, "-n", "1,2", *more]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _key(c: dict) -> tuple:
    return (c["inputs"]["path"], c["vllm"]["version"], c["inputs"]["num_speculative_tokens"])


def _verdicts(cells: list[dict]) -> list[tuple]:
    return [(_key(c), sorted({f["code"] for f in c["findings"] if f["severity"] == "error"})) for c in cells]


def test_the_cluster_gives_the_local_pool_s_verdicts_cell_for_cell(cluster, checkpoints, tmp_path):
    """Twelve cells on the cluster and on a local pool of as many processes (2), each probing
    afresh (caches and probe workers of their own): the same cells in the same order with the
    same findings, dict for dict; text, JSON and JUnit from one run; both nodes ran cells, each
    reported once. The driver's cache secret reaches the cells, never a log."""
    local_out, cluster_out, junit = tmp_path / "local.json", tmp_path / "cluster.json", tmp_path / "c.xml"
    local_env = {**os.environ, "MTPLINT_CACHE_DIR": str(tmp_path / "local-cache")}
    local_env["MTPLINT_WORKER_DIR"] = tempfile.mkdtemp(prefix="mtw-", dir="/tmp")
    try:
        local = subprocess.run(
            _matrix(checkpoints, "-j", "2", "--format", "json", "--output", str(local_out), "-q"),
            capture_output=True,
            text=True,
            env=local_env,
            timeout=900,
        )
    finally:
        from mtplint.probe.workers import stop_all

        stop_all(Path(local_env["MTPLINT_WORKER_DIR"]))
        shutil.rmtree(local_env["MTPLINT_WORKER_DIR"], ignore_errors=True)
    assert local.returncode == 1, local.stderr[-3000:]
    args = ["--cluster", cluster.address, "--format", "json", "--format", "junit", "--format", "text"]
    args += ["--output", str(cluster_out), "--output", str(junit), "--output", "-"]
    env = _driver_env(cluster, tmp_path, MTPLINT_CACHE_SECRET=SECRET, HF_TOKEN=TOKEN)
    remote = subprocess.run(_matrix(checkpoints, *args), capture_output=True, text=True, env=env, timeout=900)
    assert remote.returncode == 1, remote.stderr[-3000:]

    local_cells, cluster_cells = _cells(local_out), _cells(cluster_out)
    assert len(cluster_cells) == 12 and len({_key(c) for c in cluster_cells}) == 12
    assert [_key(c) for c in cluster_cells] == [_key(c) for c in local_cells]
    assert [c["findings"] for c in cluster_cells] == [c["findings"] for c in local_cells]
    assert _verdicts(cluster_cells)[:4] == [((checkpoints[0], v, n), []) for v in ("0.29.0", "0.33.0") for n in (1, 2)]
    assert all(codes for _, codes in _verdicts(cluster_cells)[4:]), "the two broken checkpoints fail every cell"
    assert not any(c["probe"]["cached"] for c in cluster_cells)

    done = [line for line in remote.stderr.splitlines() if "/12] " in line]
    assert len(done) == 12, remote.stderr[-3000:]
    nodes = {line.split("(node 127.0.0.1 ")[1].split(",")[0] for line in done}
    assert len(nodes) == 2, "both nodes ran cells"
    assert "works on every probed vLLM (0.29.0, 0.33.0)" in remote.stdout
    assert remote.stdout.count("works on none of the probed vLLMs") == 2
    import xml.etree.ElementTree as ET

    suites = ET.fromstring(junit.read_text()).findall("testsuite")
    assert sum(len(s.findall("testcase")) for s in suites) == 12

    # The nodes have no cache secret of their own: the driver's reached the cells (they cached
    # their reports sealed with it, and a second run is served from that cache) ...
    again_out = tmp_path / "again.json"
    again = subprocess.run(
        _matrix(checkpoints, "--cluster", cluster.address, "--format", "json", "--output", str(again_out)),
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert again.returncode == 1, again.stderr[-3000:]
    assert all(c["probe"]["cached"] for c in _cells(again_out))
    assert [c["findings"] for c in _cells(again_out)] == [c["findings"] for c in local_cells]
    # ... and neither it nor the hub token is in the output, the reports or any file Ray wrote.
    for text in (remote.stdout, remote.stderr, again.stderr, cluster_out.read_text(), junit.read_text()):
        assert SECRET not in text and TOKEN not in text
    leaked = [
        p for p in cluster.session_logs() if SECRET.encode() in p.read_bytes() or TOKEN.encode() in p.read_bytes()
    ]
    assert leaked == [], f"a secret in Ray's files: {leaked}"


def _cell_processes(cluster: RayCluster, running: bool) -> list[int]:
    """The cluster's CellRunner actor processes (Ray titles them ray::CellRunner, and
    ray::CellRunner.lint_cell while a cell runs; they carry the cluster's marker variable)."""
    import psutil

    marker = cluster.env["MTPLINT_TEST_RAY_CLUSTER"]
    out = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        title = (proc.info["cmdline"] or [""])[0]
        if not title.startswith("ray::CellRunner") or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if running and not title.startswith("ray::CellRunner.lint_cell"):
            continue
        try:
            if proc.environ().get("MTPLINT_TEST_RAY_CLUSTER") == marker:
                out.append(proc.pid)
        except psutil.Error:
            continue
    return out


def _wait(condition, seconds: float = 300.0, what: str = "", proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"mtplint ended (exit {proc.returncode}) before {what}: {proc.stderr.read()[-3000:]}")
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_ray_worker_killed_mid_cell_loses_no_cell_and_reports_none_twice(cluster, checkpoints, tmp_path):
    """--no-cache, so every cell probes. Once a cell is running in an actor, that actor's process
    is killed (SIGKILL): its cell is queued again and runs on a node still alive; the report has
    every cell exactly once, each with its errors."""
    out = tmp_path / "m.json"
    env = _driver_env(cluster, tmp_path)
    args = _matrix(checkpoints[1:], "--cluster", cluster.address, "--no-cache", "--format", "json")
    proc = subprocess.Popen(
        [*args, "--output", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        victim = _wait(lambda: _cell_processes(cluster, running=True), what="a running cell", proc=proc)[0]
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr[-3000:]
    assert stdout == ""  # the report went to its file
    assert "queued again" in stderr, stderr[-3000:]
    cells = _cells(out)
    assert sorted(_key(c) for c in cells) == sorted(
        (p, v, n) for p in checkpoints[1:] for v in ("0.29.0", "0.33.0") for n in (1, 2)
    )
    assert len({_key(c) for c in cells}) == len(cells) == 8
    assert all(sorted({f["code"] for f in c["findings"] if f["severity"] == "error"}) for c in cells)
    assert len([line for line in stderr.splitlines() if "/8] " in line]) == 8


def test_ctrl_c_cancels_the_job_and_leaves_no_cell_running(cluster, checkpoints, tmp_path):
    """SIGINT while cells run: exit 130, and every actor process is gone within seconds (their
    probes die with them); the cluster itself stays up for the next job."""
    env = _driver_env(cluster, tmp_path)
    args = _matrix(checkpoints, "--cluster", cluster.address, "--no-cache", "--format", "json", "-q")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _wait(lambda: _cell_processes(cluster, running=True), what="a running cell", proc=proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-3000:]
    assert stdout == "" and "mtplint: interrupted" in stderr
    _wait(lambda: not _cell_processes(cluster, running=False), seconds=60, what="the actors to end")
    assert cluster.alive_nodes() == 2
