"""Parent side of the probe workers (lint/probe/child/worker.py): find or start the worker for a
probe, hand it the request, and follow the child it forks like a child of our own.

One worker per (interpreter, vLLM, mtplint's source, platform shim, the environment variables
read at import time). It outlives the mtplint that started it by `MTPLINT_WORKER_IDLE`
seconds (default 300; 0: no worker, every probe imports vLLM itself), so a matrix, a fix's
re-lints and the next lint of another checkpoint cost construction and dry-run only. At
most `MAX_WORKERS` live at once (each holds vLLM imported, ~0.5-1 GiB); the least recently
used gives way.

Anything that keeps a worker from serving before it has forked the child (it cannot start,
its interpreter crashes on import, a stale socket) falls back to the cold child, which then
fails or succeeds on its own terms: the verdict never depends on the worker.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..core.source_digest import tree_digest
from .memory_cap import tree_rss

IDLE_ENV = "MTPLINT_WORKER_IDLE"
DIR_ENV = "MTPLINT_WORKER_DIR"
DEFAULT_IDLE = 300.0
MAX_WORKERS = 3
_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
# Read by Python, torch, vLLM, transformers or the hub client while they are imported: a
# worker started under other values would not be the cold probe's twin.
_IMPORT_TIME_ENV = (
    "VLLM_",
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "TORCH",
    "PYTORCH_",
    "CUDA_",
    "OMP_",
    "MKL_",
    "TOKENIZERS_",
    "TRITON_",
    "LD_",
    "PYTHON",
    "XDG_",
    "MTPLINT_STUB_",
    "HOME",
)
# Set per probe by the runner: never part of the worker's identity.
PER_REQUEST_ENV = ("MTPLINT_PROBE_TENSORS", "MTPLINT_PROBE_PARENT", "MTPLINT_PROBE_PHASES", "TMPDIR", "PYTHONPATH")


def idle_seconds() -> float:
    raw = os.environ.get(IDLE_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_IDLE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise BadInput(f"{IDLE_ENV} must be a number of seconds >= 0 (0: no probe worker), not {raw[:40]!r}")
    return value


def root() -> Path:
    """Where the sockets live: $MTPLINT_WORKER_DIR, else the cache's `workers/`, else (a path
    too long for a socket name) a directory of this user's in the temp directory."""
    from ..core.cache_dirs import cache_root

    given = os.environ.get(DIR_ENV)
    path = Path(given) if given else cache_root() / "workers"
    if len(str(path)) + 32 > _SOCKET_PATH_MAX:  # NAME.sock, and NAME.sock.PID while it binds
        path = Path(tempfile.gettempdir()) / f"mtplint-{os.getuid()}-workers"
    return path


def _private_dir(path: Path) -> bool:
    """The directory exists, is ours and nobody else's: only then may a socket in it be trusted."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.lstat()
    except OSError:
        return False
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid():
        return False
    if st.st_mode & 0o077:
        with contextlib.suppress(OSError):
            path.chmod(0o700)
        return not (path.stat().st_mode & 0o077)
    return True


def import_env(env: dict[str, str]) -> dict[str, str]:
    """The part of a probe's environment its imports read."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(_IMPORT_TIME_ENV) and k not in PER_REQUEST_ENV}


def key(python: str, identity: dict[str, Any], platform: dict[str, Any], env: dict[str, str], package: Path) -> str:
    what = [
        # Its environment, not its name: .venv/bin/python and .venv/bin/python3 are one.
        os.path.realpath(os.path.dirname(os.path.abspath(python))),
        identity.get("version"),
        identity.get("commit"),
        # A re-provisioned environment (same path and vLLM, its own pins) needs a new worker.
        identity.get("libraries"),
        platform,
        import_env(env),
        os.environ.get("PYTHONPATH", ""),
        tree_digest(package),
    ]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _connect(sock: Path) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(sock))
    except OSError:
        s.close()
        return None
    return s


class WarmChild:
    """A probe child forked by a worker, followed as subprocess.Popen follows one of ours:
    `pid` (its own process group), `wait(timeout)` -> return code (-N: signal N)."""

    def __init__(self, conn: socket.socket, pid: int, buffered: bytes = b""):
        self.conn, self.pid = conn, pid
        self.returncode: int | None = None
        self._buf = buffered  # the return code may come in the same read as the pid

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = 30.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired("probe worker child", timeout or 0)
            self.conn.settimeout(left)
            try:
                chunk = self.conn.recv(4096)
            except TimeoutError:
                if deadline is None:  # a worker that says nothing for 30 s after a kill: count it dead
                    chunk = b""
                else:
                    raise subprocess.TimeoutExpired("probe worker child", timeout or 0) from None
            except OSError:
                chunk = b""
            if not chunk:  # the worker died: its children got the parent-death signal
                self.returncode = -9
                self.conn.close()
                return self.returncode
            self._buf += chunk
        line = self._buf.split(b"\n", 1)[0]
        try:
            self.returncode = int(json.loads(line)["rc"])
        except (ValueError, KeyError, TypeError):
            self.returncode = -9
        self.conn.close()
        return self.returncode


def _read_reply(conn: socket.socket, timeout: float) -> tuple[dict[str, Any] | None, bytes]:
    """The worker's next line, and what came after it."""
    conn.settimeout(timeout)
    data = b""
    try:
        while b"\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                return None, b""
            data += chunk
    except OSError:
        return None, b""
    line, rest = data.split(b"\n", 1)
    try:
        reply = json.loads(line)
    except ValueError:
        return None, b""
    return (reply if isinstance(reply, dict) else None), rest


def _stop(sock: Path) -> None:
    conn = _connect(sock)
    if conn is None:
        with contextlib.suppress(OSError):
            sock.unlink()  # nobody listens: a stale name
        return
    with conn:
        with contextlib.suppress(OSError):
            conn.sendall(b'{"stop": true}\n')
        _read_reply(conn, 5.0)


def live(where: Path | None = None) -> list[dict[str, Any]]:
    """What each worker under `where` (default: root()) says it is, with its socket and the
    memory it holds; sockets nobody answers on are left out."""
    base = where or root()
    out = []
    for sock in sorted(base.glob("*.sock")) if base.is_dir() else []:
        conn = _connect(sock)
        if conn is None:
            continue
        with conn:
            try:
                conn.sendall(b'{"ping": true}\n')
            except OSError:
                continue
            reply, _ = _read_reply(conn, 5.0)
        if reply and isinstance(reply.get("pid"), int):
            out.append({**reply, "socket": str(sock), "rss": tree_rss(reply["pid"])})
    return out


def stop_all(where: Path | None = None) -> int:
    """Stop every worker under `where` (default: root()); how many answered or were stale."""
    base = where or root()
    socks = list(base.glob("*.sock")) if base.is_dir() else []
    for sock in socks:
        _stop(sock)
    return len(socks)


def _make_room(base: Path, keep: Path) -> None:
    live = sorted((s for s in base.glob("*.sock") if s != keep), key=lambda s: s.stat().st_mtime)
    for sock in live[: max(0, len(live) - (MAX_WORKERS - 1))]:
        _stop(sock)


def _package_link(base: Path, package: Path) -> Path:
    """A directory whose `mtplint` entry is this package, for an interpreter that lacks it."""
    link_dir = base / f"pkg-{hashlib.sha256(str(package).encode()).hexdigest()[:12]}"
    link = link_dir / "mtplint"
    if not link.is_symlink():
        link_dir.mkdir(exist_ok=True)
        tmp = link_dir / f".mtplint-{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)
    return link_dir


def _start(
    sock: Path,
    python: str,
    platform: dict[str, Any],
    env: dict[str, str],
    package: Path,
    idle: float,
    limit: float,
    memory_limit: int | None,
) -> socket.socket | None:
    """Start the worker and wait until it listens; None when it cannot (the caller probes cold)."""
    base = sock.parent
    worker_env = {k: v for k, v in env.items() if k not in PER_REQUEST_ENV}
    user_path = os.environ.get("PYTHONPATH")
    worker_env["PYTHONPATH"] = os.pathsep.join([str(_package_link(base, package))] + ([user_path] if user_path else []))
    with open(sock.with_suffix(".log"), "wb") as log:
        proc = subprocess.Popen(
            [python, "-m", "mtplint.probe.child.worker", str(sock), str(idle), json.dumps(platform)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=worker_env,
            cwd=base,
            start_new_session=True,
        )
    started = time.monotonic()
    try:
        while True:
            conn = _connect(sock)
            if conn is not None:
                _STARTED.append(proc)
                return conn
            if proc.poll() is not None:
                return None
            over_memory = memory_limit is not None and (tree_rss(proc.pid) or 0) > memory_limit
            if over_memory or time.monotonic() - started > limit:
                _kill(proc)
                return None
            time.sleep(0.05)
    except BaseException:
        _kill(proc)
        raise


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, 9)
    with contextlib.suppress(Exception):
        proc.wait(timeout=10)


# Workers this process started: reaped at exit if they ended first (no zombie left behind).
_STARTED: list[subprocess.Popen] = []


def launch(
    *,
    python: str,
    identity: dict[str, Any],
    platform: dict[str, Any],
    env: dict[str, str],
    argv: list[str],
    cwd: Path,
    log: Path,
    timeout: float,
    memory_limit: int | None,
    progress: Callable[[str], None] | None,
) -> WarmChild | None:
    """The probe child, forked by a warm worker (started first if need be); None: probe cold."""
    idle = idle_seconds()
    if idle <= 0 or not hasattr(socket, "AF_UNIX") or not hasattr(os, "fork"):
        return None
    package = Path(__file__).resolve().parent.parent
    base = root()
    if not _private_dir(base):
        return None
    sock = base / f"{key(python, identity, platform, env, package)}.sock"
    with _locked(sock.with_suffix(".lock")):
        conn = _connect(sock)
        if conn is None:
            _make_room(base, keep=sock)
            if progress:
                progress("probe: starting a vLLM worker (imports vLLM once; later probes fork from it)")
            conn = _start(sock, python, platform, env, package, idle, timeout, memory_limit)
            if conn is None:
                return None
        elif progress:
            progress("probe: on a warm vLLM worker")
    with contextlib.suppress(OSError):
        os.utime(sock, follow_symlinks=False)  # most recently used
    try:
        conn.sendall(json.dumps({"argv": argv, "env": env, "cwd": str(cwd), "log": str(log)}).encode() + b"\n")
    except OSError:
        conn.close()
        return None
    reply, rest = _read_reply(conn, 30.0)
    if reply is None or not isinstance(reply.get("pid"), int):
        conn.close()
        return None
    return WarmChild(conn, reply["pid"], rest)


def _reap() -> None:
    for proc in _STARTED:
        proc.poll()


atexit.register(_reap)
