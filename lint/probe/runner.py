"""Parent side of the probe: run the child, enforce the timeout, cache the report.

The child is `python -m mtplint.probe.child` in the current interpreter, or in another one
(`--vllm-python`) that has vLLM but maybe not mtplint: a temporary directory holding a
link named `mtplint` to this package is put on its PYTHONPATH.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..core.errors import BadInput, ProbeFailure
from ..core.gc_pause import gc_paused
from ..core.launch_env import child_environ
from ..core.regular_files import read_capped
from ..core.signals import terminating_signals_raise
from ..core.source_digest import tree_digest
from ..inventory.model import Inventory
from . import cache, phases, staged_files, staged_headers, staged_paths, workers
from .lifecycle import PARENT_ENV, end_group, mark_owner, sweep_stale
from .memory_cap import format_size, tree_rss
from .report import SCHEMA_VERSION, ChildRequest, ProbeReport, Request

DEFAULT_TIMEOUT = 600.0
MAX_JSON_BYTES = 256 << 20  # the inventory's limit on config.json, which it has read already
_POLL_SECONDS = 0.25  # how often the parent checks the probe's deadline and memory

# Probe children running now, from any thread: a matrix probes cells side by side, and on
# Ctrl-C its main thread ends them all (a signal reaches the main thread only).
_running: set[subprocess.Popen | workers.WarmChild] = set()
_running_lock = threading.Lock()


def end_running_probes() -> int:
    """Kill every probe child this process is waiting for; how many there were. Each waiting
    thread sees its child end by the signal and reaps it itself (end_group in _run_child)."""
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return len(procs)


@dataclass
class ProbeRequest(Request):
    """What to model (the report's Request: the same fields, the same names) and how to run
    the child that models it."""

    python: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    memory_limit: int | None = None  # bytes the probe's processes may hold resident (not in the key)
    identity: dict[str, Any] | None = None  # the vLLM `python` has (vllm_identity): picks the worker
    # The separate draft's checkpoint (`--draft`; `speculative` names its method): its config
    # goes to vLLM as the speculative model, its tensors to the draft's dry-run load.
    draft_inventory: Inventory | None = None
    serve_model: str | None = None  # the serve command's model as read here; the child confirms it

    @classmethod
    def replaying(cls, modelled: Request, **how: Any) -> ProbeRequest:
        """The request a report answered (a recorded or cached one), run the way `how` says."""
        return cls(**{f.name: getattr(modelled, f.name) for f in fields(Request)}, **how)

    def modelled(self) -> Request:
        return Request(**{f.name: getattr(self, f.name) for f in fields(Request)})

    def key_fields(self) -> dict[str, Any]:
        # gpu_memory only sizes caches vLLM never builds here: the same GPU model, one key.
        # An empty arch (CUDA) is left out: keys from before AMD GPUs stay the same.
        key = {f.name: getattr(self, f.name) for f in fields(Request) if f.name != "gpu_memory"}
        if not key["arch"]:
            del key["arch"]
        else:
            # vLLM's ROCm switches (VLLM_ROCM_USE_AITER...) change what the probe reports there.
            key["rocm_env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("VLLM_ROCM_")}
        if not key["serve_env"]:
            del key["serve_env"]  # keys from before serve commands' environments stay the same
        # The child inherits mtplint's environment: a VLLM_* switch set there is probed too.
        if inherited := {k: v for k, v in sorted(os.environ.items()) if _keyed_switch(k)}:
            key["vllm_env"] = inherited
        return {**key, "sm": list(self.sm), "patches": sorted(self.patches)}


def _keyed_switch(name: str) -> bool:
    # ROCm's are keyed on AMD GPUs only (rocm_env); the logging ones change no finding.
    return name.startswith("VLLM_") and not name.startswith(("VLLM_ROCM_", "VLLM_LOGGING_", "VLLM_CONFIGURE_LOGGING"))


def _package_dir() -> Path:
    return Path(__file__).resolve().parent.parent


def vllm_identity(python: str | None) -> dict[str, Any]:
    """vLLM's version and commit in the interpreter that will be probed, without importing
    vLLM itself (that costs ~10 s): read from its installed metadata and _version.py, or
    remembered from the last read while none of those files changed (identity_memo)."""
    from . import identity_memo

    exe = python or sys.executable
    remembered = identity_memo.load(exe)
    if remembered is not None:
        return remembered
    identity = _read_identity(exe)
    sources = identity.pop("sources", None) or []
    if identity.get("version") is not None and isinstance(sources, list):
        identity_memo.store(exe, identity, [str(p) for p in sources])
    return identity


def _read_identity(exe: str) -> dict[str, Any]:
    # `sources`: the files the answer comes from, whose stamps keep the remembered answer honest.
    code = (
        "import importlib.metadata as m, importlib.util as u, json, re, pathlib\n"
        "v = None\n"
        "src = []\n"
        "try:\n"
        "    d = m.distribution('vllm')\n"
        "    v = d.version\n"
        "    dp = getattr(d, '_path', None)\n"
        "    if dp is not None: src += [str(dp), str(pathlib.Path(dp) / 'METADATA')]\n"
        "except Exception: pass\n"
        "c = None\n"
        "s = u.find_spec('vllm')\n"
        "if s and s.origin:\n"
        "    src.append(s.origin)\n"
        "    p = pathlib.Path(s.origin).parent / '_version.py'\n"
        "    if p.exists():\n"
        "        src.append(str(p))\n"
        "        t = p.read_text()\n"
        '        mm = re.search(r"__commit_id__\\s*=\\s*(?:commit_id\\s*=\\s*)?[\'\\"]([^\'\\"]+)[\'\\"]", t)\n'
        "        c = mm.group(1) if mm else None\n"
        # The libraries vLLM's config and quantization paths import: each environment pins its
        # own (lint/envs/pins.py); torch is the interpreter's shared CPU build.
        "lib = {}\n"
        "for n in ('transformers', 'compressed-tensors', 'torch'):\n"
        "    try:\n"
        "        d = m.distribution(n)\n"
        "        lib[n] = d.version\n"
        "        dp = getattr(d, '_path', None)\n"
        "        if dp is not None: src.append(str(pathlib.Path(dp) / 'METADATA'))\n"
        "    except Exception: pass\n"
        "print(json.dumps({'version': v, 'commit': c, 'python': __import__('sys').executable, 'libraries': lib,"
        " 'sources': src}))\n"
    )
    try:
        out = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise BadInput(f"--vllm-python {exe}: no such interpreter") from None
    except subprocess.TimeoutExpired:
        raise ProbeFailure(f"{exe}: timed out while reading vLLM's version") from None
    if out.returncode != 0:
        raise ProbeFailure(f"{exe}: could not read vLLM's version: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_vllm_commit(wanted: str | None, identity: dict[str, Any]) -> None:
    if not wanted:
        return
    version, commit = identity.get("version"), identity.get("commit")
    if version is None:
        raise BadInput(
            f"no vLLM is installed in {identity.get('python')}; install it or pass "
            "--vllm-python PATH to an interpreter that has it"
        )
    w = wanted.lower().removeprefix("v")
    candidates = [version.lower()]
    if commit:
        c = commit.lower()
        candidates += [c, c.removeprefix("g")]
    if any(x == w or (len(w) >= 7 and x.startswith(w.removeprefix("g"))) for x in candidates):
        return
    raise BadInput(
        f"--vllm-commit {wanted} does not match the vLLM that would be probed: version {version}, "
        f"commit {commit} in {identity.get('python')}. Install that vLLM (scripts/setup.sh "
        f"pins the supported one) or point --vllm-python at an interpreter that has it."
    )


def cache_inputs(inventory: Inventory, request: ProbeRequest, identity: dict[str, Any]) -> dict[str, Any]:
    """What a probe report depends on, as digests: the cache entry's name is their hash, and
    the entry keeps them so a read compares them with the lint at hand (probe.cache)."""

    def checkpoint(inv: Inventory) -> dict[str, Any]:
        return {
            "config_sha256": hashlib.sha256(read_capped(inv.config_path, MAX_JSON_BYTES)).hexdigest(),
            "quant_sha256": hashlib.sha256(json.dumps(inv.hf_quant_config, sort_keys=True).encode()).hexdigest(),
            "inventory": inv.digest,
            # Every other file staged into the probe, by content (staged_files).
            "staged": staged_files.digests(inv.root, request.trust_remote_code),
        }

    draft = request.draft_inventory
    return {
        "schema": SCHEMA_VERSION,
        "vllm": [identity.get("version"), identity.get("commit"), identity.get("python"), identity.get("libraries")],
        "target": checkpoint(inventory),
        "draft": checkpoint(draft) if draft is not None else None,
        "request": json.loads(json.dumps(request.key_fields(), sort_keys=True)),
        "probe_source": _source_digest(),
    }


def _source_digest() -> str:
    """The probe's own code is part of the key: a changed probe must not serve old reports."""
    return tree_digest(_package_dir(), ("probe", "patches"))


def run_probe(
    inventory: Inventory,
    request: ProbeRequest,
    *,
    identity: dict[str, Any] | None = None,
    use_cache: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ProbeReport:
    identity = identity or vllm_identity(request.python)
    inputs = cache_inputs(inventory, request, identity)
    draft = request.draft_inventory
    user_paths = (_shown(inventory), _shown(draft) if draft is not None else None)
    if use_cache:
        hit = cache.load(inputs)
        if hit is not None:
            hit.cached = True
            staged_paths.to_user_paths(hit, *user_paths)
            return hit
    with tempfile.TemporaryDirectory(prefix="mtplint-probe-") as tmp:
        request.identity = identity  # which worker may serve it
        report = _run_child(inventory, request, Path(tmp), progress)
        report.cached = False
        _raise_for_usage(report)
        _raise_for_environment(report)
        staged_paths.to_placeholders(report, Path(tmp))
    if use_cache:
        with gc_paused():
            cache.store(inputs, report)
    staged_paths.to_user_paths(report, *user_paths)
    return report


def _shown(inventory: Inventory) -> str:
    """A checkpoint as the user named it: its hub origin, else its directory."""
    return inventory.origin or str(inventory.root)


def _stage(inventory: Inventory, tmp: Path, name: str, trust_remote_code: bool) -> tuple[Path, Path]:
    """The model directory vLLM reads (configuration only) and the tensor list the dry run
    feeds as meta tensors, for one checkpoint."""
    config_dir = tmp / f"{name}config"
    config_dir.mkdir()
    (config_dir / "config.json").write_bytes(read_capped(inventory.config_path, MAX_JSON_BYTES))
    # The configuration code auto_map names (configuration_*.py) travels with config.json.
    for extra in staged_files.names(inventory.root, trust_remote_code):
        (config_dir / extra).write_bytes(staged_files.read(inventory.root, extra))
    staged_headers.stage(inventory, config_dir)
    tensors_file = tmp / f"{name}tensors.json"
    tensors_file.write_text(json.dumps([[t.name, t.dtype, list(t.shape)] for t in inventory.tensors.values()]))
    return config_dir, tensors_file


def _run_child(
    inventory: Inventory, request: ProbeRequest, tmp: Path, progress: Callable[[str], None] | None
) -> ProbeReport:
    mark_owner(tmp)
    sweep_stale(tmp.parent, keep=tmp)
    config_dir, tensors_file = _stage(inventory, tmp, "", request.trust_remote_code)
    req = ChildRequest(
        **asdict(request.modelled()),
        config_dir=str(config_dir),
        tensors_file=str(tensors_file),
        serve_model=request.serve_model,
    )
    if request.draft_inventory is not None:
        draft_dir, draft_tensors = _stage(request.draft_inventory, tmp, "draft_", request.trust_remote_code)
        req.draft_config_dir, req.draft_tensors_file = str(draft_dir), str(draft_tensors)
    req_file, report_file = tmp / "request.json", tmp / "report.json"
    req_file.write_text(json.dumps(req.to_json()))
    env = _child_env(tmp, tensors_file)
    env.update(request.serve_env)  # as the server would run: `VLLM_X=1 vllm serve ...`
    # Absolute: the child starts in `tmp`, where a relative interpreter path means nothing.
    python = os.path.abspath(request.python) if request.python else sys.executable
    cmd = [python, "-m", "mtplint.probe.child", str(req_file), str(report_file)]
    env[phases.ENV] = str(tmp / "phases.jsonl")
    stderr_file = tmp / "stderr.txt"
    # SIGTERM/SIGHUP (a CI cancel, a closed terminal) raise like Ctrl-C while the child runs,
    # so its group is killed here and run_probe's TemporaryDirectory is removed.
    with terminating_signals_raise(), open(stderr_file, "wb") as err:
        proc: subprocess.Popen | workers.WarmChild | None = workers.launch(
            python=python,
            identity=request.identity or {},
            platform=request.modelled().platform(),
            env=env,
            argv=[str(req_file), str(report_file)],
            cwd=tmp,
            log=stderr_file,
            timeout=request.timeout,
            memory_limit=request.memory_limit,
            progress=progress,
        )
        if proc is None:
            if progress:
                progress("probe: starting vLLM")
            proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, env=env, cwd=tmp, start_new_session=True)
        started = time.perf_counter()
        with _running_lock:
            _running.add(proc)
        try:
            rc = _supervise(proc, request, started, stderr_file, _relay(tmp / "phases.jsonl", progress))
        finally:
            with _running_lock:
                _running.discard(proc)
            end_group(proc)  # every way out: done, timeout, memory, exception, signal
    elapsed = time.perf_counter() - started
    if rc != 0:
        how = f"was killed by signal {-rc} ({signal.Signals(-rc).name})" if rc < 0 else f"exited with status {rc}"
        tail = _tail(stderr_file)
        raise ProbeFailure(f"the vLLM probe {how}{_crash_summary(tail, request.python)}", detail=tail)
    try:
        with gc_paused():  # a report holds every tensor's attribution: large and acyclic
            report = ProbeReport.from_json(json.loads(report_file.read_text()))
    except (OSError, ValueError) as exc:
        raise ProbeFailure(f"the vLLM probe wrote no readable report ({exc})", detail=_tail(stderr_file)) from None
    report.seconds = elapsed
    return report


def _child_env(tmp: Path, tensors_file: Path) -> dict[str, str]:
    """The probe child's environment: scrubbed (core.launch_env), this mtplint importable by
    its name, vLLM quiet and on no GPU, one string hashing, its temporary files in `tmp`."""
    env = child_environ()
    link_dir = tmp / "pkg"
    link_dir.mkdir()
    (link_dir / "mtplint").symlink_to(_package_dir(), target_is_directory=True)
    env["PYTHONPATH"] = os.pathsep.join([str(link_dir)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    env["VLLM_CONFIGURE_LOGGING"] = "1"
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    env["MTPLINT_PROBE_CHILD"] = "1"
    # One string hashing for every probe (its workers too): vLLM names "some parameters like X"
    # from a set (step3p5_mtp.py's completeness check), and a report must not change between probes.
    env["PYTHONHASHSEED"] = "0"
    # Drafts that build a Sampler (Hy3) import FlashInfer for it, a GPU-only package the probe
    # environment lacks; vLLM's own switch picks the PyTorch sampler, which builds the same modules.
    env["VLLM_USE_FLASHINFER_SAMPLER"] = "0"
    env["MTPLINT_PROBE_TENSORS"] = str(tensors_file)  # what patches read instead of shards
    env[PARENT_ENV] = str(os.getpid())
    # Whatever vLLM, torch or a patch writes to a temp file lands in ours and goes with it.
    (tmp / "tmp").mkdir()
    env["TMPDIR"] = str(tmp / "tmp")
    return env


def _relay(path: Path, progress: Callable[[str], None] | None) -> Callable[[], None]:
    """What the supervisor calls each poll: the child's new phases, to the progress line."""
    reader = phases.Reader(path)
    tick = getattr(progress, "tick", None)  # a live line keeps its seconds counting

    def relay() -> None:
        new = reader.new()
        for phase in new:
            if progress:
                progress(f"probe: {phase}")
        if not new and tick:
            tick()

    return relay


def _supervise(
    proc: subprocess.Popen | workers.WarmChild,
    request: ProbeRequest,
    started: float,
    stderr_file: Path,
    relay: Callable[[], None],
) -> int:
    """Wait for the child, relaying its phases; raise when it overruns its time or its memory
    (the caller kills it)."""
    while True:
        try:
            rc = proc.wait(timeout=_POLL_SECONDS)
            relay()
            return rc
        except subprocess.TimeoutExpired:
            pass
        relay()
        if time.perf_counter() - started > request.timeout:
            raise ProbeFailure(
                f"the vLLM probe did not finish within {request.timeout:.0f} s and was killed "
                f"(raise --probe-timeout if the machine is slow)",
                detail=_tail(stderr_file),
            )
        if request.memory_limit and (rss := tree_rss(proc.pid) or 0) > request.memory_limit:
            raise ProbeFailure(
                f"the vLLM probe held {format_size(rss)} of memory, over its limit of "
                f"{format_size(request.memory_limit)}, and was killed; raise the limit with --probe-memory SIZE "
                "(or MTPLINT_PROBE_MEMORY, or probe-memory in your project's mtplint.toml) if this checkpoint "
                "needs more",
                detail=_tail(stderr_file),
            )


# Config-stage errors that say "this vLLM cannot be probed here", not "this checkpoint is
# wrong": reported as probe failures (exit 3), never as findings about the artifact.
_ENVIRONMENT_ERRORS = (
    (
        "failed to be inspected",
        "vLLM could not inspect the model class on this machine (its "
        "registry import failed; multimodal classes need a torchvision that loads beside this torch)",
    ),
)


def _raise_for_usage(report: ProbeReport) -> None:
    if report.serve_args_rejected:
        raise BadInput(f"vllm serve command: {report.serve_args_rejected}")
    message = report.config_error.message if report.config_error else ""
    if "trust_remote_code" in message:
        raise BadInput(
            "config.json names custom configuration code (auto_map), which the probe runs "
            "only when asked: pass --trust-remote-code if you trust this checkpoint",
            detail=message[-1500:],
        )


def _raise_for_environment(report: ProbeReport) -> None:
    message = report.config_error.message if report.config_error else ""
    for needle, why in _ENVIRONMENT_ERRORS:
        if needle in message:
            raise ProbeFailure(f"the vLLM probe cannot build this architecture here: {why}", detail=message[-1500:])
    # A module the probed environment lacks says nothing about the checkpoint: a probe failure
    # naming the family and the module, never an MTP009 verdict.
    for model, err in report.construction_errors.items():
        if err.type in ("ModuleNotFoundError", "ImportError"):
            arch = report.models[model].architecture if model in report.models else model
            raise ProbeFailure(
                f"the vLLM probe cannot build the {model} model ({arch}) here: {err.type}: {err.message}",
                detail=err.message[-1500:],
            )


_EXCEPTION_LINE = re.compile(r"^(?:\[rank\d+\]: )?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)): (.*)$")
_FRAME_LINE = re.compile(r'^(?:\[rank\d+\]: )?\s*File "([^"]+)", line (\d+)')


def _crash_summary(tail: str, python: str | None) -> str:
    """': <exception> (at <file>:<line>)' from a Python traceback in the probe's stderr, plus
    what to do when the probed environment lacks a module vLLM imports."""
    lines = tail.splitlines()
    exc = next((m for line in reversed(lines) if (m := _EXCEPTION_LINE.match(line.strip()))), None)
    if exc is None:
        return ""
    frame = next((m for line in reversed(lines) if (m := _FRAME_LINE.match(line))), None)
    where = f" (at {frame.group(1)}:{frame.group(2)})" if frame else ""
    out = f": {exc.group(1)}: {exc.group(2)}{where}"
    if exc.group(1) == "ModuleNotFoundError":
        out += (
            f"; the probed environment ({python or sys.executable}) lacks a package this vLLM "
            "imports: install it there (scripts/alt_vllm.sh VERSION PACKAGE for a release beside the pin)"
        )
    return out


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])
