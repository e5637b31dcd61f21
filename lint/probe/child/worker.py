"""Probe worker: `python -m mtplint.probe.child.worker SOCKET IDLE_SECONDS PLATFORM_JSON`.

A fork server. It runs `child.prepare()` once (the platform shim, importing vLLM: ~8 of a
probe's ~12 s), then answers each request on a Unix socket by forking a child that runs the
rest of the probe, exactly as a cold child would after the same prepare(). One request's
patches, configuration and global state die with its child; the worker never constructs a
model itself.

Protocol, one JSON object per line: the client sends {"argv": [REQUEST, REPORT], "env":
{...}, "cwd": DIR, "log": FILE}; the worker answers {"pid": N} once the child runs (in its own
session, so the client can kill its group) and {"rc": N} when it ends (-N: killed by signal
N). {"ping": true} gets what the worker is (pid, platform, idle time, probes running);
{"stop": true} ends the worker once its running probes are done. Only the worker's own user can connect (the socket's
directory is 0700, and the peer's uid is checked).

The worker exits after IDLE_SECONDS without a request or a running child. Runs in the probed
interpreter: nothing beyond the stdlib and the probe's own modules.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
import traceback
from typing import Any

_READ_LIMIT = 4 << 20  # a request is an argv, a cwd, a log path and an environment


def _peer_uid(conn: socket.socket) -> int | None:
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]
    except (AttributeError, OSError):
        return None  # no SO_PEERCRED here: the directory's mode is the guard


def _read_line(conn: socket.socket, timeout: float = 10.0) -> dict[str, Any] | None:
    conn.settimeout(timeout)
    data = b""
    try:
        while b"\n" not in data and len(data) < _READ_LIMIT:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    try:
        msg = json.loads(data.split(b"\n", 1)[0])
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def _send(conn: socket.socket, msg: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(msg).encode() + b"\n")


def _run_child(msg: dict[str, Any], closing: list[socket.socket]) -> None:
    """In the forked child: become a cold probe's twin, answer, and never return."""
    rc = 1
    try:
        for s in closing:
            with contextlib.suppress(OSError):
                s.close()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        fd = os.open(msg["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.chdir(msg["cwd"])
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in msg["env"].items()})
        import tempfile

        tempfile.tempdir = None  # TMPDIR is this request's
        from .. import lifecycle, phases
        from .entry import answer

        phases.restart_clock()
        lifecycle.die_with_client(int(msg["env"][lifecycle.PARENT_ENV]))
        rc = answer(msg["argv"][0], msg["argv"][1], prepared=True)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(rc)


def _accept(listener: socket.socket, running: dict[int, socket.socket], about: dict[str, Any]) -> str | None:
    """Take one connection: a request forks its child, a ping says what the worker is, a stop
    request ends the worker."""
    conn, _addr = listener.accept()
    if _peer_uid(conn) not in (None, os.getuid()):
        conn.close()
        return None
    msg = _read_line(conn)
    if msg is None:
        conn.close()
        return None
    if msg.get("ping"):
        _send(conn, {**about, "pid": os.getpid(), "running": len(running)})
        conn.close()
        return None
    if msg.get("stop"):
        _send(conn, {"stopped": True})
        conn.close()
        return "stop"
    pid = os.fork()
    if pid == 0:
        _run_child(msg, [listener, conn, *running.values()])
    running[pid] = conn
    _send(conn, {"pid": pid})
    return None


def _reap(running: dict[int, socket.socket]) -> bool:
    """Tell each client whose child ended its return code; whether any ended."""
    ended = False
    while running:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        conn = running.pop(pid, None)
        if conn is not None:
            _send(conn, {"rc": -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)})
            conn.close()
        ended = True
    return ended


def serve(sock_path: str, idle: float, platform: dict[str, Any]) -> int:
    from .entry import prepare

    prepare(platform)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{sock_path}.{os.getpid()}"
    listener.bind(tmp)
    os.chmod(tmp, 0o600)
    os.replace(tmp, sock_path)  # clients connect only to a worker that is ready
    inode = os.stat(sock_path).st_ino
    listener.listen(16)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    running: dict[int, socket.socket] = {}
    last, listening = time.monotonic(), True
    about = {"platform": platform, "idle": idle, "started": time.time()}
    try:
        while listening or running:
            for _ in sel.select(timeout=0.1):
                if _accept(listener, running, about) == "stop":
                    # Probes in flight finish (they belong to other lints); nobody new gets in.
                    sel.unregister(listener)
                    _leave(sock_path, inode, listener)
                    listening = False
                last = time.monotonic()
            if _reap(running):
                last = time.monotonic()
            if listening and not running and time.monotonic() - last > idle:
                return 0
        return 0
    finally:
        _leave(sock_path, inode, listener)


def _leave(sock_path: str, inode: int, listener: socket.socket) -> None:
    # Only its own socket: a successor may already have taken the name.
    with contextlib.suppress(OSError):
        if os.stat(sock_path).st_ino == inode:
            os.unlink(sock_path)
    listener.close()


def main(argv: list[str]) -> int:
    return serve(argv[1], float(argv[2]), json.loads(argv[3]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
