"""What one lint checked and under which serving settings: the report's `inputs`, typed.

Built once by the pipeline, read as attributes by the checks and the reporters, and written as
the report's `inputs` object (docs/report-json.md) with its keys in the order they have always
had, unset ones left out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunInputs:
    path: str  # the checkpoint linted as given (with --draft: the draft), a hub one as hf://ORG/NAME@COMMIT
    gpu: str | None = None
    sm: str | None = None  # "9.0"
    num_speculative_tokens: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    patches: tuple[str, ...] | None = None  # runtime patch ids active during the probe
    reference: str | None = None  # --reference: the source checkpoint compared with
    target: str | None = None  # --draft: the target the draft (path) was linted against
    method: str | None = None  # --draft: the speculative method it was built for
    settings_files: tuple[dict[str, str], ...] | None = None  # {path, source} per settings file read

    @property
    def separate_draft(self) -> bool:
        """A draft from its own checkpoint is linted (path), against a target."""
        return self.target is not None

    def replace(self, **changes: Any) -> RunInputs:
        return dataclasses.replace(self, **changes)

    def to_json(self, *, without: tuple[str, ...] = ()) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in without:
                continue
            if value is not None:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, data: Any) -> RunInputs:
        """The report's `inputs` object (a null member is an unset one); ValueError naming what
        does not fit."""
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if v is not None}
        if not isinstance(data, dict) or not isinstance(data.get("path"), str):
            raise ValueError("inputs: an object with a string `path`")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"inputs: unknown key(s) {', '.join(unknown)}")
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**values)
