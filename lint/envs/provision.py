"""Create a probe environment: a --target directory holding one vLLM with --no-deps, the
release's own pins of its pure-Python requirements where they differ from mtplint's
interpreter (lint/envs/pins.py: 0.19.0's transformers 4.x and compressed-tensors 0.14), the
modules that vLLM imports without declaring them, and a `python` wrapper running mtplint's
own interpreter with that directory first on the path.

The interpreter supplies torch (the CPU build, installed by scripts/setup.sh: shared by every
environment, whatever torch the release pins) and every requirement whose resolved version it
already holds; the probe stubs vLLM's native and GPU-only parts. Packages come from uv when it is installed
(about 4x faster than pip from a cold cache, and near-instant from a warm one: it hard-links
from its cache), else from pip; MTPLINT_INSTALLER=pip|uv chooses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..core.errors import BadInput, ProbeFailure
from . import pins, store

Say = Callable[[str], None]

# Import what the probe imports, under its shim, and name the first module that is missing.
# vLLM logs to stdout while it imports: only the marked line is the answer.
_MISSING_MODULE_CHECK = """
from mtplint.probe.child import runtime_shim
try:
    runtime_shim.install((9, 0), "NVIDIA H100 80GB HBM3", 80 * 2**30)
    import vllm.config, vllm.model_executor.models  # noqa: F401
    from vllm.model_executor.layers.quantization import get_quantization_config
    # Imports every quantization method (0.10-0.11: gguf's imports gguf at module level).
    get_quantization_config("fp8")
except ModuleNotFoundError as exc:
    print("MISSING-MODULE:", (exc.name or "").split(".")[0])
"""


def base_python() -> str:
    """mtplint's interpreter, by the name it was started with (a venv's python is a symlink
    that must keep its name to find the venv)."""
    return os.path.abspath(sys.executable)


def uv_binary() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() else shutil.which("uv")


def installer() -> str:
    chosen = os.environ.get("MTPLINT_INSTALLER", "").strip().lower()
    if chosen in ("pip", "uv"):
        return chosen
    return "uv" if uv_binary() else "pip"


def install_command(tool: str, site: Path, packages: list[str]) -> list[str]:
    if tool == "uv":
        uv = uv_binary()
        if uv is None:
            raise BadInput("MTPLINT_INSTALLER=uv but no uv is installed (pip install uv)")
        return [uv, "pip", "install", "-q", "--python", base_python(), "--no-deps", "--target", str(site), *packages]
    pip = [base_python(), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
    return [*pip, "--target", str(site), *packages]


def install(tool: str, site: Path, packages: list[str], what: str) -> None:
    proc = subprocess.run(install_command(tool, site, packages), capture_output=True, text=True)
    if proc.returncode == 0:
        return
    said = "\n".join(
        line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("WARNING: Location")
    )
    if "No matching distribution" in said or "no version" in said.lower() or "not found in the package" in said:
        raise BadInput(f"{what}: not on the package index ({said.splitlines()[-1] if said else tool})")
    raise ProbeFailure(f"{what}: {tool} install failed", detail=said[-3000:])


def missing_probe_requirements() -> list[str]:
    """The distributions of mtplint's `probe` extra that its interpreter lacks (none where
    mtplint runs from a source tree without being installed: nothing to compare with)."""
    from importlib.metadata import PackageNotFoundError, requires, version

    from packaging.requirements import Requirement

    try:
        specs = requires("mtplint") or []
    except PackageNotFoundError:
        return []
    missing = []
    for spec in specs:
        req = Requirement(spec)
        if req.marker is None or not req.marker.evaluate({"extra": "probe"}) or req.marker.evaluate({"extra": ""}):
            continue  # a core requirement or another extra's
        try:
            version(req.name)
        except PackageNotFoundError:
            missing.append(req.name)
    return missing


def require_probe_base() -> None:
    """A release environment is vLLM over mtplint's own interpreter, which must hold what
    every environment shares: mtplint's `probe` extra (torch's CPU build, vLLM's pure-Python
    requirements)."""
    missing = missing_probe_requirements()
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise BadInput(
            f"mtplint's interpreter ({base_python()}) lacks {shown} from the `probe` extra a probe environment "
            "runs on: install `mtplint[probe]` with torch from the CPU index (README: Install as a tool), "
            "or pass --vllm-python PATH to a Python that has vLLM"
        )


def write_wrapper(env_dir: Path, label: str, stubs: list[str] | None = None) -> Path:
    lines = [
        "#!/bin/sh",
        f"# {label}: ./site first on the path, on mtplint's interpreter and its dependencies.",
        'HERE=$(cd "$(dirname "$0")" && pwd)',
    ]
    if stubs:
        # Build outputs a source tree lacks: the probe's shim stubs them like native extensions.
        lines.append(f"MTPLINT_STUB_MISSING={','.join(stubs)}; export MTPLINT_STUB_MISSING")
    lines.append(f'PYTHONPATH="$HERE/site${{PYTHONPATH:+:$PYTHONPATH}}" exec "{base_python()}" "$@"')
    python = env_dir / "python"
    python.write_text("\n".join(lines) + "\n")
    python.chmod(0o755)
    return python


def add_missing_modules(env_dir: Path, tool: str, say: Say | None, what: str) -> list[str]:
    """Install, one by one, the modules this vLLM imports that the interpreter lacks."""
    added: list[str] = []
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", "CUDA_VISIBLE_DEVICES": ""}
    for _ in range(6):
        proc = subprocess.run(
            [str(env_dir / "python"), "-c", _MISSING_MODULE_CHECK], capture_output=True, text=True, env=env
        )
        missing = [ln.split(": ", 1)[1].strip() for ln in proc.stdout.splitlines() if ln.startswith("MISSING-MODULE:")]
        if not missing or not missing[0] or missing[0] in added:
            break
        if say:
            say(f"{what} imports {missing[0]}, which the shared interpreter lacks: adding it")
        install(tool, env_dir / "site", [missing[0]], f"{what}: module {missing[0]}")
        added.append(missing[0])
    return added


def finish(tmp: Path, name: str, record: dict[str, Any]) -> store.Env:
    (tmp / store.RECORD).write_text(json.dumps(record, indent=1) + "\n")
    final = store.root() / name
    if final.exists():
        store.remove(final)
    tmp.rename(final)
    return store.read(final)


def staging(name: str) -> Path:
    tmp = store.root() / f".new-{name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "site").mkdir(parents=True)
    return tmp


def release(version: str, commit: str | None, *, say: Say | None = None, extra: list[str] | None = None) -> store.Env:
    """The environment of a vLLM release, provisioned on first use."""
    with store.locked(version):
        env = store.find(version)
        if env is not None and not extra:
            return env
        tool = installer()
        started = time.perf_counter()
        if say:
            say(f"provisioning vLLM {version} into {store.root() / version} (first use; {tool})")
        tmp = staging(version)
        try:
            steps: dict[str, float] = {}
            install(tool, tmp / "site", [f"vllm=={version}"], f"vLLM {version}")
            steps["vllm"] = time.perf_counter() - started
            own = release_pins(tmp / "site", version, extra or [], tool, say, steps)
            if extra:
                install(tool, tmp / "site", list(extra), f"vLLM {version}: --with {' '.join(extra)}")
            write_wrapper(tmp, f"vLLM {version}")
            lap = time.perf_counter()
            added = add_missing_modules(tmp, tool, say, f"vLLM {version}")
            steps["import_check"] = time.perf_counter() - lap
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        seconds = time.perf_counter() - started
        env = finish(
            tmp,
            version,
            {
                "kind": "release",
                "version": version,
                "commit": commit,
                "base_python": base_python(),
                "installer": tool,
                **own,
                "extra_modules": [*(extra or []), *added],
                "created": time.time(),
                "seconds": round(seconds, 1),
                "steps": {k: round(v, 1) for k, v in steps.items()},
            },
        )
        if say:
            named = ", ".join(f"{n} {own['pins'][n]}" for n in pins.NAMED if n in own["pins"])
            say(f"vLLM {version} ready in {seconds:.1f} s ({store.human(store.size(env.path))}; {named})")
        return env


def release_pins(
    site: Path, version: str, extra: list[str], tool: str, say: Say | None, steps: dict[str, float]
) -> dict[str, Any]:
    """Resolve the release's own Requires-Dist (uv) as of the day it was published and install
    what the interpreter lacks at the resolved version into SITE; the record's fields."""
    what = f"vLLM {version}"
    uv = _uv(what)
    dist_info = site / f"vllm-{version}.dist-info"
    if not dist_info.is_dir():
        found = sorted(site.glob("vllm-*.dist-info"))
        if not found:
            raise ProbeFailure(f"{what}: the installed wheel has no vllm-*.dist-info to read its requirements from")
        dist_info = found[0]
    reqs, dropped = pins.requirements(dist_info)
    lap = time.perf_counter()
    as_of = pins.published_by(uv, base_python(), version)
    steps["published_by"] = time.perf_counter() - lap
    return own_pins(site, reqs, dropped, as_of, what, extra, tool, say, steps)


def _uv(what: str) -> str:
    uv = uv_binary()
    if uv is None:
        raise ProbeFailure(f"{what}: resolving its own requirements needs uv, which is not installed (pip install uv)")
    return uv


def own_pins(
    site: Path,
    reqs: list[str],
    dropped: list[str],
    as_of: str | None,
    what: str,
    extra: list[str],
    tool: str,
    say: Say | None,
    steps: dict[str, float],
) -> dict[str, Any]:
    """REQS resolved as of AS_OF for what vLLM's config and quantization paths import, the rest
    near the interpreter's; the pins the interpreter lacks installed into SITE."""
    uv = _uv(what)
    lap = time.perf_counter()
    # As it shipped: transformers, compressed-tensors and all they require at that day's versions.
    shipped = pins.resolve(uv, base_python(), reqs, dropped, what, as_of=as_of)
    held = {n: shipped.pins[n] for n in sorted(shipped.closure(pins.NAMED))}
    # The rest (API server, tracing, grammar...: nothing the probe's config and quantization
    # paths import) as close to the interpreter's as the release's own ranges allow.
    shared = pins.installed()
    near = {n: shared[n] for n in shipped.pins if n in shared and n not in held}
    resolved = pins.resolve(uv, base_python(), reqs, dropped, what, fixed=held, prefer=near).pins
    steps["resolve"] = time.perf_counter() - lap
    # A package given with --with is the user's choice: it replaces the resolved one.
    chosen = {canonicalize_name(Requirement(e).name) for e in extra if _parses(e)}
    wanted = [p for p in pins.differing(resolved, shared) if canonicalize_name(p.split("==")[0]) not in chosen]
    if wanted:
        if say:
            day = f"as the package index held them on {as_of}" if as_of else "as the package index holds them now"
            held_text = f"{len(held)} held as shipped, {day}"
            say(f"{what}: {len(wanted)} of its {len(resolved)} requirements differ from mtplint's ({held_text})")
        lap = time.perf_counter()
        install(tool, site, wanted, f"{what}: its pinned requirements")
        steps["pins"] = time.perf_counter() - lap
    return {
        "pins": resolved,
        "pins_as_of": as_of,  # the day the release was on the index; None: the day it was provisioned
        "pins_as_shipped": sorted(held),
        "pins_installed": sorted(p.split("==")[0] for p in wanted),
        "gpu_only_dropped": dropped,
        "torch": shared.get("torch"),
    }


def _parses(spec: str) -> bool:
    try:
        Requirement(spec)
    except InvalidRequirement:
        return False
    return True
