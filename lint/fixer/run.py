"""The fix session: lint, plan the selected fixes, apply, lint again.

Kept apart from the click command so tests (and other tools) can plan and apply in-process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import BadInput
from ..findings import SEVERITY_RANK, Finding
from ..inventory.model import Inventory
from .plan import Change, Rendered, render
from .registry import FIXES, Fix


@dataclass
class Linted:
    inventory: Inventory
    report: dict[str, Any]
    findings: list[Finding]


def lint(path: Path, s: dict[str, Any], *, fresh: bool = False,
         progress: Callable[[str], None] | None = None) -> Linted:
    """`mtplint check`'s pipeline. fresh: probe again, ignoring the cache, and store the new
    report so a `mtplint check` right after does not probe a third time."""
    from ..engine.run import evaluate
    from ..gpus import resolve
    from ..inventory.checkpoint import load_inventory
    from ..probe import cache
    from ..probe.runner import ProbeRequest, cache_key, check_vllm_commit, run_probe, vllm_identity

    gpu = resolve(s.get("gpu"), s.get("sm"))
    inventory = load_inventory(path)
    identity = vllm_identity(s.get("vllm_python"))
    check_vllm_commit(s.get("vllm_commit"), identity)
    if identity.get("version") is None:
        raise BadInput(f"no vLLM is installed in {identity.get('python')} (run scripts/setup.sh, "
                       "or pass --vllm-python)")
    request = ProbeRequest(
        sm=gpu.sm, gpu_name=gpu.name, gpu_memory=gpu.memory,
        num_speculative_tokens=s["num_speculative_tokens"],
        tensor_parallel_size=s["tensor_parallel_size"],
        pipeline_parallel_size=s["pipeline_parallel_size"], patches=[],
        serve_args={"kv_cache_dtype": s["kv_cache_dtype"]} if s.get("kv_cache_dtype") else {},
        python=s.get("vllm_python"), timeout=s["probe_timeout"], elide=not s.get("no_elision"),
    )
    use_cache = not (fresh or s.get("no_cache"))
    report = run_probe(inventory, request, identity=identity, use_cache=use_cache, progress=progress)
    if fresh:
        cache.store(cache_key(inventory, request, identity), report)
    inputs = {"path": str(path), "gpu": gpu.key, "sm": f"{gpu.sm[0]}.{gpu.sm[1]}",
              "num_speculative_tokens": request.num_speculative_tokens,
              "tensor_parallel_size": request.tensor_parallel_size,
              "pipeline_parallel_size": request.pipeline_parallel_size, "patches": []}
    findings, _ = evaluate(inventory, report, inputs)
    return Linted(inventory, report, findings)


def parse_only(only: str | None) -> list[str] | None:
    """--only ids, validated before anything is probed."""
    if not only:
        return None
    ids = [i.strip() for i in only.split(",") if i.strip()]
    unknown = [i for i in ids if i not in FIXES]
    if unknown or not ids:
        raise BadInput(f"--only: unknown fix id(s) {', '.join(unknown) or repr(only)}; "
                       f"known: {', '.join(FIXES)}")
    return ids


def choose(only: list[str] | None, findings: list[Finding]) -> list[Fix]:
    """The --only fixes, else every registered fix some finding recommends."""
    wanted = set(only) if only is not None else {i for f in findings for i in f.fixes.artifact}
    return [f for f in FIXES.values() if f.id in wanted]  # registry order is plan order


def plan_all(linted: Linted, fixes: list[Fix], options: dict[str, Any]) -> dict[str, list[Change]]:
    return {f.id: f.plan_for(linted.inventory, linted.report, linted.findings, options) for f in fixes}


def render_all(root: Path, plans: dict[str, list[Change]]) -> Rendered:
    return render(root, [c for changes in plans.values() for c in changes])


def blocking(findings: list[Finding], fail_on: str) -> list[Finding]:
    return [f for f in findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on]]


def unaddressed(findings: list[Finding], fix_ids: set[str]) -> list[Finding]:
    """Findings no planned fix resolves, directly or through the finding they follow from."""
    by_id = {f.id: f for f in findings}
    resolved: dict[str, bool] = {}

    def ok(f: Finding, depth: int = 0) -> bool:
        if f.id not in resolved:
            cause = by_id.get(f.caused_by or "")
            resolved[f.id] = bool(set(f.fixes.artifact) & fix_ids) or (
                cause is not None and depth < 8 and ok(cause, depth + 1))
        return resolved[f.id]

    return [f for f in findings if not ok(f)]
