"""Serve a twin on the engine in a child process with a timeout, and read its outcome."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ProbeFailure
from ..core.launch_env import child_environ

CHILD = Path(__file__).with_name("engine_child.py")
DEFAULT_TIMEOUT_S = 600.0
# Run first in the engine's own Python, before engine_child.py: the engine dies with mtplint
# even when mtplint is SIGKILLed (it runs in its own session, so no terminal signal reaches it,
# and its own timeout could be minutes away). Linux's parent-death signal survives the exec of
# the child script; a parent already gone by then (the instant between fork and prctl) ends it.
_LAUNCH = (
    "import os, runpy, signal, sys\n"
    "if sys.platform.startswith('linux'):\n"
    "    import ctypes\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)\n"  # PR_SET_PDEATHSIG
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


class CannotServe(Exception):
    """The engine cannot serve this request on this machine (the message says why)."""


class EngineDied(ProbeFailure):
    """The engine process ended without writing an outcome: killed by a signal (an illegal
    instruction in a CPU kernel: SIGILL) or exited; what the engine did, measured."""

    def __init__(self, message: str, *, returncode: int, tail: str) -> None:
        super().__init__(message, detail=tail)
        self.returncode = returncode
        self.tail = tail

    @property
    def signal_name(self) -> str | None:
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    def what(self) -> str:
        """One line: how the process ended and the last line it logged that says why."""
        how = f"{self.signal_name} (signal {-self.returncode})" if self.signal_name else f"exit {self.returncode}"
        said = [ln.strip() for ln in self.tail.splitlines() if ln.strip()]
        last = next((ln for ln in reversed(said) if _SAYS_WHY.search(ln)), said[-1] if said else "")
        return f"the engine process died: {how}" + (f"; its last words: {last[:200]}" if last else "")


_SAYS_WHY = re.compile(r"error|fault|illegal|abort|killed|assert|exception|core dumped", re.IGNORECASE)


def cpu_bind(tp: int, *, share_cores: bool = False) -> str | None:
    """VLLM_CPU_OMP_THREADS_BIND for TP > 1: the CPUs this process may use, split into `tp`
    contiguous groups, one per engine worker ("0|1" on two cores). vllm-cpu's own binding
    assigns one NUMA node per worker and asserts when there are fewer nodes than workers
    (measured, 0.32.0: "Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers"
    on this one-node machine); a manual list is what its message asks for. share_cores: fewer cores
    than workers is tried anyway, the workers taking the cores in turn ("0|1|0|1" for TP 4 on two),
    so the engine itself says what it does with it."""
    if tp <= 1:
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < tp:
        if share_cores:
            return "|".join(str(cpus[i % len(cpus)]) for i in range(tp))
        raise CannotServe(
            f"TP {tp} on the CPU engine needs at least {tp} CPU cores (one per engine worker); "
            f"this process may use {len(cpus)}"
        )
    per = len(cpus) // tp
    groups = [cpus[i * per : (i + 1) * per] for i in range(tp)]
    return "|".join(",".join(str(c) for c in g) for g in groups)


@dataclass
class Outcome:
    load: str  # "ok" | "error"
    vllm: str | None
    error: dict[str, Any] | None = None
    tokens: list[int] = field(default_factory=list)
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[float] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    run_error: dict[str, Any] | None = None  # started, then raised generating

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.draft_tokens if self.load == "ok" and self.draft_tokens else None


def _counter(c: dict[str, Any], key: str) -> Any:
    return c.get(f"vllm:spec_decode_{key}", 0)


def outcome(raw: dict[str, Any]) -> Outcome:
    c = raw.get("counters") or {}
    drafts = int(_counter(c, "num_drafts") or 0)
    per_pos = _counter(c, "num_accepted_tokens_per_pos") or []
    return Outcome(
        load=raw.get("load", "error"),
        vllm=raw.get("vllm"),
        error=raw.get("error"),
        tokens=list(raw.get("tokens") or []),
        drafts=drafts,
        draft_tokens=int(_counter(c, "num_draft_tokens") or 0),
        accepted=int(_counter(c, "num_accepted_tokens") or 0),
        per_position=[round(v / drafts, 4) if drafts else 0.0 for v in per_pos],
        timings=raw.get("timings") or {},
        run_error=raw.get("run_error"),
    )


def serve(
    python: str,
    model: Path,
    n: int,
    *,
    trust_remote_code: bool,
    prompt: list[int],
    tp: int = 1,
    max_tokens: int = 16,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    speculative: dict[str, str] | None = None,
    share_cores: bool = False,
) -> Outcome:
    """speculative: {"method": M} and, for a separate draft, {"model": DIR} (None: the
    checkpoint's own MTP block)."""
    with tempfile.TemporaryDirectory(prefix="mtplint-engine-") as tmp:
        req, res = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request = {
            "model": str(Path(model).absolute()),
            "n": n,
            "trust_remote_code": trust_remote_code,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "tp": tp,
            "speculative": speculative,
        }
        req.write_text(json.dumps(request))
        # Scrubbed as the probe's (core.launch_env): the engine runs the twin's and, with
        # --trust-remote-code, the checkpoint's code, which has no use for a hub token or the cache secret.
        env = {**child_environ(), "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
        env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        bind = cpu_bind(tp, share_cores=share_cores)
        if bind is not None:
            env["VLLM_CPU_OMP_THREADS_BIND"] = bind
        env.pop("PYTHONPATH", None)  # the engine's own environment only
        started = time.perf_counter()
        proc = subprocess.Popen(
            [python, "-c", _LAUNCH, str(os.getpid()), str(CHILD), str(req), str(res)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=tmp,
            start_new_session=True,  # the engine's own workers die with it on a timeout
        )
        try:
            log, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise ProbeFailure(f"the engine did not finish within {timeout_s:.0f} s (serving {model})") from None
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        if not res.is_file():
            tail = "\n".join(log.splitlines()[-30:])
            raise EngineDied(
                f"the engine exited {proc.returncode} without an outcome (serving {model})",
                returncode=proc.returncode,
                tail=tail,
            )
        out = outcome(json.loads(res.read_text()))
        out.timings["child"] = round(time.perf_counter() - started, 2)
        return relay_worker_error(out, log)


# At TP > 1 a worker's exception reaches the engine's main process only as `EOFError` (a worker
# that died starting: multiproc_executor.wait_for_ready) or `RuntimeError: Worker failed with
# error '...'` (generating); the worker's own exception and where it was raised are in the log.
_RELAYED = re.compile(r"^Worker failed with error|^$")
_WORKER_LINE = re.compile(r"^\((Worker\S*) pid=\d+\) \w+ \S+ \S+ \[[^\]]*\] ?(.*)$")
_FRAME = re.compile(r'^\s*File "(?:.*site-packages/)?(.*?)", line (\d+), in (\S+)')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): ?(.*)$")


def relay_worker_error(out: Outcome, log: str) -> Outcome:
    """The outcome with a worker's relayed error replaced by the worker's own exception."""
    for key in ("error", "run_error"):
        err = getattr(out, key)
        if not err or "multiproc_executor" not in str((err.get("where") or {}).get("file")):
            continue
        if not _RELAYED.search(str(err.get("message") or "")):
            continue
        own = worker_exception(log)
        if own is not None:
            setattr(out, key, {**own, "relayed_as": err.get("type")})
    return out


def worker_exception(log: str) -> dict[str, Any] | None:
    """The first exception a TP worker logged: type, message (its continuation lines too), the
    innermost frame; None where no worker logged a traceback."""
    where: dict[str, Any] | None = None
    found: dict[str, Any] | None = None
    in_trace = False
    for line in log.splitlines():
        m = _WORKER_LINE.match(line)
        if m is None:
            continue
        text = m.group(2)
        if found is not None:
            if not text.strip() or text.startswith(("Traceback", " ", "WorkerProc")):
                return found
            found["message"] += "\n" + text
            continue
        if text.startswith("Traceback (most recent call last)"):
            in_trace, where = True, None
            continue
        if not in_trace:
            continue
        frame = _FRAME.match(text)
        if frame is not None:
            where = {"file": frame.group(1), "line": int(frame.group(2)), "function": frame.group(3)}
            continue
        exc = _EXCEPTION.match(text)
        if exc is not None:
            found = {
                "type": exc.group(1).rsplit(".", 1)[-1],
                "message": exc.group(2),
                "where": where,
                "worker": m.group(1),
            }
    return found
