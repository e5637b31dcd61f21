"""Findings remembered per lint, so the everyday loop (pre-commit, fix, re-lint) of an unchanged
checkpoint skips the inventory memo, the probe report and the checks.

A lint is remembered under the hash of what can be known before vLLM's identity is read: the
checkpoint's memo signature (every JSON file's bytes and every shard's header, inventory.memo),
the bytes of every other file staged into the probe (probe.staged_files: Python files,
generation_config.json), the leftovers of an interrupted fix, the settings, the patches
asked for and mtplint's own code and rule files. The entry also keeps what only the lint knows
later: vLLM's identity and the probe request. A read compares all of it with the lint at hand; any difference is a miss
and the lint runs in full. Entries are sealed like every cache entry (core.cache_dirs), so a
verdict can only come from this user's own mtplint having linted exactly these inputs.

Not remembered: --reference (its checks sample weight bytes, which no signature covers), hub
or unkeyable checkpoints, and lints given an inventory (fix over a hub snapshot).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import marshal
from importlib import resources
from pathlib import Path
from typing import Any

from ..config.schema import LintSettings
from ..core.cache_dirs import cache_root, read_entry, write_entry
from ..core.errors import BadInput
from ..core.findings import Finding, Fixes, Location
from ..core.probe_summary import ProbedVllm, ProbeSummary
from ..core.run_inputs import RunInputs
from ..core.source_digest import tree_digest
from ..core.versions import __version__
from ..probe import staged_files
from ..view.draft_modules import DraftModule

_FORMAT = "mtplint-verdict-v1"


@dataclasses.dataclass
class Remembered:
    """What the reporters read from a lint, as it was stored."""

    findings: list[Finding]
    evaluated: list[dict[str, Any]]
    inputs: RunInputs
    vllm: ProbedVllm
    probe: ProbeSummary
    origin: str | None
    counts: tuple[int, int]  # tensors, shards: the progress line a full lint prints
    modules: list[DraftModule] | None = None  # the draft's module table (-v) without the probe report


def pre_inputs(path: Path, s: LintSettings, patches: list[str]) -> dict[str, Any] | None:
    """The part of a remembered lint's inputs known before vLLM is asked anything; None where
    the lint is not remembered."""
    from ..inventory import memo
    from ..inventory.shard_source import LocalShards

    if s.no_cache or s.reference is not None or not path.is_dir():
        return None
    target = memo.signature(path.absolute())
    if target is None:
        return None
    staged = _staged(path, s.draft)
    if staged is None:
        return None
    draft = draft_leftovers = None
    if s.draft:
        draft_path = Path(s.draft)
        if not draft_path.is_dir():
            return None  # a hub draft: its revision is resolved by the full lint
        draft = memo.signature(draft_path.absolute())
        if draft is None:
            return None
        draft_leftovers = LocalShards(draft_path).fix_leftovers()  # with --draft, the draft is linted
    return _plain(
        {
            "format": _FORMAT,
            "mtplint": __version__,
            "source": _source_digest(),
            "path": str(path),
            "target": target,
            "draft": draft,
            "staged": staged,
            "fix_leftovers": LocalShards(path).fix_leftovers(),
            "draft_fix_leftovers": draft_leftovers,
            "settings": s.key(),
            "patches": list(patches),
        }
    )


def _staged(path: Path, draft: str | None) -> list[dict[str, str]] | None:
    """The digests of the files staged into the probe beside config.json (its Python files
    whether or not --trust-remote-code stages them: cheap, and never stale), of the target and
    the draft; None where one cannot be read (the full lint says why, where it reads it)."""
    try:
        return [staged_files.digests(root, True) for root in [path, *([Path(draft)] if draft else [])]]
    except BadInput:
        return None


def full_inputs(pre: dict[str, Any], identity: dict[str, Any], request_key: dict[str, Any]) -> dict[str, Any]:
    return _plain({**pre, "vllm": identity, "request": request_key})


def _plain(value: Any) -> Any:
    """JSON-shaped (lists, str keys), so a stored copy compares equal to a recomputed one."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


@functools.cache
def _source_digest() -> str:
    """mtplint's code and rule files: a changed check must not serve the old findings."""
    rules = Path(str(resources.files("mtplint.ruledata")))
    return tree_digest(Path(__file__).resolve().parent.parent) + tree_digest(rules, pattern="*.toml")


def _entry(pre: dict[str, Any]) -> Path:
    name = hashlib.sha256(json.dumps(pre, sort_keys=True).encode()).hexdigest()
    return cache_root() / "verdicts" / f"{name}.marshal"


def candidate(pre: dict[str, Any]) -> dict[str, Any] | None:
    """The sealed entry stored under `pre`'s name, not yet compared with vLLM's identity."""
    blob = read_entry(_entry(pre))
    if blob is None:
        return None
    try:
        entry = marshal.loads(blob)  # only sealed bytes, written by store()
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != _FORMAT:
        return None
    return entry


def recall(entry: dict[str, Any], full: dict[str, Any]) -> Remembered | None:
    """The remembered lint, if the entry was stored for exactly `full`."""
    if entry.get("inputs") != full:
        return None
    try:
        return _decode(entry["payload"])
    except (KeyError, TypeError, ValueError):
        return None


def store(
    pre: dict[str, Any],
    full: dict[str, Any],
    findings: list[Finding],
    evaluated: list[dict[str, Any]],
    inputs: RunInputs,
    vllm: ProbedVllm,
    probe: ProbeSummary,
    origin: str | None,
    counts: tuple[int, int],
    modules: list[DraftModule],
) -> None:
    """Remember a lint; nothing when its findings would not come back exactly as they are (a
    value marshal cannot keep, or one it would give back as another type)."""
    payload = {
        "findings": [dataclasses.asdict(f) for f in findings],
        "evaluated": evaluated,
        "inputs": inputs.to_json(),
        "vllm": vllm.to_json(),
        "probe": probe.to_json(),
        "origin": origin,
        "counts": list(counts),
        "modules": [m.to_json() for m in modules],
    }
    try:
        blob = marshal.dumps({"format": _FORMAT, "inputs": full, "payload": payload})
        back = _decode(marshal.loads(blob)["payload"])
    except (ValueError, TypeError, KeyError):
        return
    if [f.to_dict() for f in back.findings] != [f.to_dict() for f in findings] or back.inputs != inputs:
        return
    if back.modules != modules:
        return
    write_entry(_entry(pre), blob)


def _decode(payload: dict[str, Any]) -> Remembered:
    findings = []
    for d in payload["findings"]:
        d = dict(d)
        location, fixes = Location(**d.pop("location")), Fixes(**d.pop("fixes"))
        findings.append(Finding(location=location, fixes=fixes, **d))
    tensors, shards = payload["counts"]
    return Remembered(
        findings=findings,
        evaluated=list(payload["evaluated"]),
        inputs=RunInputs.from_json(payload["inputs"]),
        vllm=ProbedVllm.from_json(payload["vllm"]),
        probe=ProbeSummary.from_json(payload["probe"]),
        origin=payload["origin"],
        counts=(int(tensors), int(shards)),
        modules=[DraftModule.from_json(m) for m in payload["modules"]] if "modules" in payload else None,
    )
