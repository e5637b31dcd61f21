"""Twin shapes from vLLM's own construction: the probe builds the twin's (shrunk) config on meta
tensors and feeds it the twin's tensors; a tensor that feeds one parameter alone (no fused
shards, no packing) takes that parameter's shape. Used where the meaning-based map guesses (a
source size that is two config sizes shrinking differently)."""

from __future__ import annotations

from pathlib import Path

from ..inventory.checkpoint import load_inventory
from ..probe.report import ProbeReport

Shape = tuple[int, ...]


def probe(twin_dir: Path, trust_remote_code: bool) -> ProbeReport:
    from ..pipeline.gpus import GPUS
    from ..probe.runner import ProbeRequest, run_probe

    g = GPUS["h100"]  # shapes do not depend on the GPU; one that every format's kernels accept
    request = ProbeRequest(sm=list(g.sm), gpu_name=g.name, gpu_memory=g.memory, trust_remote_code=trust_remote_code)
    return run_probe(load_inventory(twin_dir), request, use_cache=False)


def flow(report: ProbeReport) -> dict[str, list[tuple[str, str]]]:
    """Twin tensor -> [(model, parameter)] it fed or failed to feed, every model's load."""
    out: dict[str, list[tuple[str, str]]] = {}
    for model, load in report.load.items():
        for tensor, params in load.fed.items():
            out.setdefault(tensor, []).extend((model, p) for p in params)
        for e in load.errors:
            if e.tensor and e.param:
                out.setdefault(e.tensor, []).append((model, e.param))
    return out


def corrections(report: ProbeReport, shapes: dict[str, Shape]) -> dict[str, Shape]:
    """Twin tensor -> the shape of the one parameter it alone feeds, where that differs from the
    twin's (shapes: the twin's tensors as written)."""
    feeds = flow(report)
    fed_by: dict[tuple[str, str], set[str]] = {}
    for tensor, targets in feeds.items():
        for target in targets:
            fed_by.setdefault(target, set()).add(tensor)
    out: dict[str, Shape] = {}
    for tensor, targets in feeds.items():
        if tensor not in shapes or len(set(p for _, p in targets)) != 1:
            continue
        model, param = targets[0]
        info = report.params.get(model, {}).get(param)
        if info is None or any(len(fed_by[t]) != 1 for t in targets):
            continue  # a fused or stacked parameter: its shard offsets are not in the report
        want = tuple(info.shape)
        if want != shapes[tensor] and len(want) == len(shapes[tensor]):
            out[tensor] = want
    return out


def shape_errors(report: ProbeReport) -> list[str]:
    """Load errors the twin's shapes cause (what vLLM raised, per tensor)."""
    return [
        f"{e.tensor}: {e.message}"
        for load in report.load.values()
        for e in load.errors
        if e.tensor and ("size" in e.message or "shape" in e.message or "dimension" in e.message)
    ]
