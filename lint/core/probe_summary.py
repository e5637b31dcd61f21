"""What a run's report says about the vLLM it probed and about the probe itself: typed, and
written and read as the report's JSON `vllm` and `probe` members (and the remembered verdict's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProbedVllm:
    """The vLLM a checkpoint was probed against; None members when no probe ran."""

    version: str | None = None
    commit: str | None = None
    # What the probed interpreter holds beside vLLM (transformers, compressed-tensors, torch):
    # each environment's own pins. Empty when the probe did not say.
    libraries: Mapping[str, str] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version, "commit": self.commit}
        if self.libraries:
            out["libraries"] = dict(self.libraries)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ProbedVllm:
        data = data or {}
        return cls(data.get("version"), data.get("commit"), dict(data.get("libraries") or {}))


@dataclass(frozen=True)
class ProbeSummary:
    """How the probe ran: its report read from the cache (or the whole lint remembered), and
    the seconds the probe took when it ran."""

    cached: bool = False
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"cached": self.cached, "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ProbeSummary:
        data = data or {}
        return cls(bool(data.get("cached")), data.get("seconds"))
