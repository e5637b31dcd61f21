"""A real Ray cluster on this machine for the `cluster` tier: `ray start --head` plus a second
node process, both on 127.0.0.1 (Ray otherwise advertises the machine's reachable address:
see below), dashboard and usage
statistics off, one CPU each. On Linux Ray turns every loopback address it is given (a node's
--node-ip-address, the --address it joins) into the machine's reachable one
(services.resolve_ip_for_localhost); the nodes run `ray start` itself with that one function
made the identity, and the drivers (mtplint) run with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
under which Ray keeps loopback for a driver. Each `ray start --block` runs in a session of its own, so
stopping the cluster ends exactly the processes it started (their process groups), never
another user's Ray (no `ray stop`, which kills every Ray process it can find by name)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

# `ray start`, with loopback kept as loopback (see above).
RAY_START = [
    sys.executable,
    "-c",
    "import sys, ray._private.services as s; s.resolve_ip_for_localhost = lambda host: host; "
    "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()",
    "start",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MTPLINT_CACHE_SECRET", "RAY_ADDRESS"):
        env.pop(k, None)  # what a worker needs comes through the runtime environment only
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", **(extra or {}))
    return env


class RayCluster:
    def __init__(self, env: dict[str, str], nodes: int = 2, cpus: int = 1) -> None:
        # A short root: Ray's unix socket paths must fit in 107 bytes.
        self.temp = Path(tempfile.mkdtemp(prefix="mtr", dir="/tmp"))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # Every process of this cluster carries it (Ray's workers inherit their raylet's
        # environment): how its processes are told from anyone else's.
        self.env = {**env, "MTPLINT_TEST_RAY_CLUSTER": str(self.temp)}
        self.procs: list[subprocess.Popen] = []
        self.cpus = cpus
        self.want = nodes

    def _start(self, *args: str) -> None:
        common = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(self.cpus)]
        common += ["--object-store-memory", str(80 * 1024 * 1024), "--disable-usage-stats"]
        common += ["--dashboard-agent-listen-port", str(free_port()), "--metrics-export-port", str(free_port())]
        common += ["--dashboard-agent-grpc-port", str(free_port()), "--runtime-env-agent-port", str(free_port())]
        log = open(self.temp / f"node{len(self.procs)}.log", "wb")  # noqa: SIM115 - lives as long as the node
        self.procs.append(
            subprocess.Popen(
                [*RAY_START, *args, *common],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={k: v for k, v in self.env.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"},
                start_new_session=True,
            )
        )

    def start(self) -> RayCluster:
        self._start(
            "--head",
            "--port",
            str(self.port),
            "--temp-dir",
            str(self.temp),
            "--include-dashboard=false",
            "--ray-client-server-port",
            str(free_port()),
        )
        self.wait_nodes(1)
        for _ in range(self.want - 1):
            self._start("--address", self.address)
        self.wait_nodes(self.want)
        return self

    def alive_nodes(self) -> int:
        code = (
            "import ray, json, logging;"
            f"ray.init(address={self.address!r}, logging_level=logging.ERROR, log_to_driver=False);"
            "print(json.dumps(sum(1 for n in ray.nodes() if n['Alive'])))"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=self.env, timeout=120)
        return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else 0

    def wait_nodes(self, n: int, seconds: float = 180) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"ray start exited: {self.logs()[-3000:]}")
            if self.alive_nodes() >= n:
                return
            time.sleep(1)
        raise RuntimeError(f"{n} Ray nodes never came up: {self.logs()[-3000:]}")

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.temp.glob("node*.log")))

    def session_logs(self) -> Iterator[Path]:
        """Every file Ray wrote under its temp directory (logs, session state)."""
        return (p for p in self.temp.rglob("*") if p.is_file() and not p.is_symlink())

    def processes(self) -> list[int]:
        """The live processes of this cluster's sessions (each node's process group)."""
        out = subprocess.run(["ps", "-eo", "pid=,pgid=,stat="], capture_output=True, text=True).stdout
        groups = {p.pid for p in self.procs}
        return [
            int(pid)
            for pid, pgid, stat in (line.split() for line in out.splitlines())
            if int(pgid) in groups and not stat.startswith("Z")
        ]

    def stop(self) -> None:
        """SIGTERM to each node's group, then SIGKILL to whatever is left (Ray drains for up to
        30 s on SIGTERM: a test cluster has nothing to drain)."""
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and self.processes():
            time.sleep(0.2)
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        for pid in self.processes():  # a worker in its own group, in one of these sessions
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        shutil.rmtree(self.temp, ignore_errors=True)
