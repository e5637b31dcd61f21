"""Findings: what rules produce and reporters render."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .probe_summary import ProbedVllm, ProbeSummary
from .run_inputs import RunInputs

# The closed sets of a finding (lint/reporters/report.schema.json enumerates the same).
Severity = Literal["error", "warning", "info"]
# "probe": vLLM itself produced the evidence; "knowledge": a hand-written table did, where the
# probe cannot reach (the forward pass); "reference": a comparison with the source checkpoint;
# "files": the checkpoints' small files, at a step vLLM does not check (a draft's tokenizer).
Basis = Literal["probe", "knowledge", "reference", "files"]
SuppressionKind = Literal["config", "baseline"]  # a [[suppress]] entry, or --baseline

SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2}


@dataclass
class Location:
    file: str  # relative to the checkpoint root: "config.json", "model-00001-of-00046.safetensors"
    tensor: str | None = None
    config_key: str | None = None


@dataclass
class Fixes:
    patches: list[str] = field(default_factory=list)  # runtime patch ids (mtplint.patches)
    artifact: list[str] = field(default_factory=list)  # artifact fix ids (mtplint fix)
    serve: str | None = None  # the exact `MTPLINT_PATCHES=... vllm serve ...` for this run's inputs


@dataclass
class Finding:
    code: str
    name: str
    severity: Severity
    message: str
    location: Location
    evidence: dict[str, Any] = field(default_factory=dict)
    fixes: Fixes = field(default_factory=Fixes)
    # The finding this one is a consequence of ("<code>:<key>"), so one root cause reads as one story.
    caused_by: str | None = None
    key: str = ""  # stable identity within a run, e.g. the module or entry it is about
    basis: Basis = "probe"

    @property
    def id(self) -> str:
        return f"{self.code}:{self.key}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["id"] = self.id
        return d


@dataclass
class Suppressed:
    """A finding the project accepted: still reported, never counted for the exit code."""

    finding: Finding
    kind: SuppressionKind
    reason: str
    source: str  # the settings file and entry, or the baseline file

    def to_dict(self) -> dict[str, Any]:
        suppression = {"kind": self.kind, "reason": self.reason, "source": self.source}
        return {**self.finding.to_dict(), "suppression": suppression}


@dataclass
class RunResult:
    """Everything reporters need: the findings plus what was checked against what."""

    findings: list[Finding]
    rules_evaluated: list[dict[str, Any]]  # [{code, name, severity, summary}]
    vllm: ProbedVllm
    inputs: RunInputs
    probe: ProbeSummary | None = None  # None: no probe said how it ran
    # Set by mtplint.pipeline.policy after the checks: findings moved out of `findings` by the
    # project's [[suppress]] entries or a --baseline, suppressions that matched nothing, and
    # the baseline's state ({file, matched, changed, new, fixed}) when one was given.
    suppressed: list[Suppressed] = field(default_factory=list)
    unused_suppressions: list[dict[str, Any]] = field(default_factory=list)
    baseline: dict[str, Any] | None = None
