"""A release's own pure-Python dependency set: its wheel's Requires-Dist (markers evaluated for
mtplint's interpreter, no extras), resolved by uv, minus torch and the CUDA/GPU-only packages.

vLLM 0.19.0 requires transformers>=4.56,<5 and compressed-tensors==0.14.0.1 where 0.33.0
requires transformers 5.x and compressed-tensors 0.17.0; their config classes and quantization
matching differ, so a release probed on another release's libraries is not that release.
torch is the one exception: every environment runs the interpreter's CPU build (the probe
stubs vLLM's native and GPU-only parts), so torch and what only a GPU runs are dropped from
the resolution (uv override to a marker that is never true), never resolved nor installed.

The resolution is made from what the package index held the day the release was published
(uv --exclude-newer): a release's open ranges resolve as they did for its users then, not to
today's newest (vLLM 0.10.2's `transformers>=4.55.2` is 4.56.1, not 5.x; 0.20.2 shipped on
transformers 5.8.0, where today's resolution picks 4.57.6; 0.33.0's is exactly its pinned set).

Only what differs from the interpreter is installed into the environment's site/; the rest
(same name, same version) is the interpreter's own copy of the same wheel.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import re
import subprocess
import tempfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..core.errors import ProbeFailure

# Never resolved nor installed: torch stays the interpreter's CPU build, and these run only on a
# GPU (vLLM's CUDA requirements; triton, nvidia-* and cuda-* arrive through torch and kernels).
GPU_ONLY = frozenset(
    {
        "torch",
        "torchaudio",
        "torchvision",
        "torchcodec",
        "triton",
        "xformers",
        "numba",
        "llvmlite",
        "deep-gemm",
        "deep-ep",
        "pplx-kernels",
        "tilelang",
        "quack-kernels",
        "cupy-cuda12x",
        "pynvml",
        "pynvvideocodec",
        "fastsafetensors",
        "instanttensor",
        "tokenspeed-mla",
        "humming-kernels",
        "apache-tvm-ffi",
        "vllm-flash-attn",
        # Not GPU-only, but the multi-node runtime (0.10-0.11 list it among their CUDA
        # requirements): the probe models ranks without it, and it is ~200 MB per release.
        "ray",
    }
)
GPU_ONLY_PREFIXES = ("nvidia-", "flashinfer", "cuda-", "cutlass")

# The libraries a release's config and quantization paths import, named in `env list` and the report.
NAMED = ("transformers", "compressed-tensors")


def gpu_only(name: str) -> bool:
    n = canonicalize_name(name)
    return n in GPU_ONLY or n.startswith(GPU_ONLY_PREFIXES)


def requires_dist(dist_info: Path) -> list[str]:
    """The wheel's Requires-Dist lines as written."""
    text = (dist_info / "METADATA").read_text(encoding="utf-8", errors="replace")
    return list(Parser().parsestr(text, headersonly=True).get_all("Requires-Dist") or [])


def requirements(dist_info: Path) -> tuple[list[str], list[str]]:
    """(the requirements to resolve, the GPU-only names dropped), for mtplint's interpreter."""
    return _filtered(requires_dist(dist_info))


def _filtered(lines: list[str]) -> tuple[list[str], list[str]]:
    no_extra = {"extra": ""}  # evaluated over this interpreter's default environment
    kept, dropped = [], []
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue  # a line the installer would refuse too; vLLM's own never is
        if (req.marker is not None and not req.marker.evaluate(no_extra)) or req.url:
            continue  # not for this interpreter; or a direct URL (a git build), not an index's pin
        if gpu_only(req.name):
            dropped.append(canonicalize_name(req.name))
            continue
        kept.append(line.split(";")[0].strip())
    return kept, sorted(set(dropped))


def tree_requirements(requirements_dir: Path) -> tuple[list[str], list[str]] | None:
    """A source tree's own requirements (requirements/cuda.txt and the files it includes, as a
    CUDA wheel is built from them), filtered as the wheel's are; None when the tree has none."""
    top = next((requirements_dir / f for f in ("cuda.txt", "common.txt") if (requirements_dir / f).is_file()), None)
    if top is None:
        return None
    lines: list[str] = []
    seen: set[Path] = set()

    def read(path: Path) -> None:
        if path in seen or not path.is_file() or requirements_dir.resolve() not in path.resolve().parents:
            return  # an include outside requirements/ is not the tree's to give
        seen.add(path)
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = raw.split(" #")[0].strip()
            if line.startswith(("-r ", "--requirement ")):
                read(path.parent / line.split(None, 1)[1].strip())
            elif line and not line.startswith(("#", "-")):
                lines.append(line)

    read(top)
    return _filtered(lines)


def installed() -> dict[str, str]:
    """mtplint's interpreter's distributions (the one every environment runs on): canonical
    name -> version."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist.version)
    return found


def published_by(uv: str, python: str, version: str) -> str | None:
    """The first day (YYYY-MM-DD, UTC midnight) by which the package index held vLLM VERSION:
    uv's `--exclude-newer` bisected over days (~11 metadata-only resolutions of vllm alone).
    None where the index keeps no upload times (a local wheel directory): nothing to bisect."""

    def listed(day: datetime.date) -> bool:
        cmd = [uv, "pip", "compile", "-", "--no-deps", "--exclude-newer", day.isoformat(), "--python", python, "-q"]
        proc = subprocess.run(cmd, input=f"vllm=={version}\n", capture_output=True, text=True, timeout=120)
        return proc.returncode == 0

    lo, hi = _EPOCH, datetime.datetime.now(datetime.UTC).date() + datetime.timedelta(days=2)
    if listed(lo) or not listed(hi):
        return None
    while (hi - lo).days > 1:
        mid = lo + (hi - lo) // 2
        lo, hi = (lo, mid) if listed(mid) else (mid, hi)
    return hi.isoformat()


# Before vLLM's oldest release mtplint probes (0.10.1, August 2025).
_EPOCH = datetime.date(2023, 1, 1)


@dataclass
class Resolution:
    pins: dict[str, str]  # canonical name -> version
    required_by: dict[str, set[str]]  # name -> the resolved packages that require it ("# via")

    def closure(self, roots: tuple[str, ...]) -> set[str]:
        """ROOTS and everything they require, transitively."""
        requires: dict[str, set[str]] = {}
        for name, parents in self.required_by.items():
            for parent in parents:
                requires.setdefault(parent, set()).add(name)
        seen, todo = set(), [r for r in roots if r in self.pins]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += [d for d in requires.get(name, ()) if d in self.pins]
        return seen


def resolve(
    uv: str,
    python: str,
    reqs: list[str],
    dropped: list[str],
    what: str,
    *,
    as_of: str | None = None,
    fixed: dict[str, str] | None = None,
    prefer: dict[str, str] | None = None,
) -> Resolution:
    """uv's resolution of REQS for PYTHON, with torch and every GPU-only package removed from
    the graph (their own dependencies with them). AS_OF: from what the index held that day (a
    release's open ranges, `transformers>=4.55.2`, as it shipped). FIXED: versions held
    (constraints); PREFER: versions kept where the rest allows (uv's existing output file)."""
    removed = sorted({*dropped, *GPU_ONLY, *_TRANSITIVE_GPU})
    with tempfile.TemporaryDirectory(prefix="mtplint-pins-") as tmp:
        req_file, over_file = Path(tmp) / "requirements.in", Path(tmp) / "overrides.txt"
        constraints, out = Path(tmp) / "constraints.txt", Path(tmp) / "resolved.txt"
        req_file.write_text("\n".join(reqs) + "\n")
        # uv's documented way to take a package out of the graph: an override never installed.
        over_file.write_text("".join(f"{n} ; sys_platform == 'never'\n" for n in removed))
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in (fixed or {}).items()))
        out.write_text("".join(f"{n}=={v}\n" for n, v in (prefer or {}).items() if n not in removed))
        cmd = [uv, "pip", "compile", str(req_file), "--override", str(over_file), "-c", str(constraints)]
        cmd += ["--python", python, "-o", str(out), "--no-header", "--quiet"]
        cmd += ["--exclude-newer", as_of] if as_of else []
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        text = out.read_text() if proc.returncode == 0 else ""
    if proc.returncode != 0:
        said = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        raise ProbeFailure(
            f"{what}: uv could not resolve its requirements ({' '.join(said[-3:])[-400:] or 'no message'})",
            detail=proc.stderr[-3000:],
        )
    found = _parse(text)
    if "transformers" not in found.pins and any(r.startswith("transformers") for r in reqs):
        raise ProbeFailure(f"{what}: uv's resolution of its requirements lacks transformers:\n{text[-800:]}")
    return found


def _parse(text: str) -> Resolution:
    """uv's annotated output: `name==version` lines, each followed by `# via` its dependents."""
    pins: dict[str, str] = {}
    required_by: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;]+)", line):
            current = canonicalize_name(m.group(1))
            if gpu_only(current):
                current = None
                continue
            pins[current] = m.group(2)
            required_by[current] = set()
        elif re.match(r"^\s+#\s+via\s*$", line):
            continue  # uv's split form: the dependents follow one a line
        elif current and (m := re.match(r"^\s+#\s+(?:via\s+)?([A-Za-z0-9][A-Za-z0-9._-]*)\s*$", line)):
            required_by[current].add(canonicalize_name(m.group(1)))
    return Resolution(dict(sorted(pins.items())), required_by)


# GPU-only packages that only arrive through another package's requirements (kernels, torch).
_TRANSITIVE_GPU = (
    "nvidia-cudnn-frontend",
    "nvidia-cutlass-dsl",
    "nvidia-ml-py",
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
)


def differing(pins: dict[str, str], shared: dict[str, str]) -> list[str]:
    """`name==version` of each pin the interpreter does not hold at that version."""
    return [f"{n}=={v}" for n, v in pins.items() if shared.get(n) != v]
