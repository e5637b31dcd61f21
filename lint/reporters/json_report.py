"""Machine-readable report, schema "mtplint/report/v1" (lint/reporters/report.schema.json, docs/report-json.md).

v1 only ever grows optional fields; a breaking change gets a new schema string.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..core.findings import RunResult
from ..core.textsafe import json_safe
from ..core.versions import __version__
from .common import jsonable, severity_counts

if TYPE_CHECKING:
    from ..engine.rule import Rule

SCHEMA_ID = "mtplint/report/v1"
SCHEMA_FILE = "report.schema.json"
SHARED_LIBRARIES = ("torch",)


def build_report(result: RunResult) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "mtplint": __version__,
        "vllm": {"version": result.vllm.version, "commit": result.vllm.commit},
        "inputs": result.inputs.to_json(),
        "findings": [f.to_dict() for f in result.findings],
        "rules_evaluated": [dict(r) for r in result.rules_evaluated],
        "summary": severity_counts(result.findings),
    }
    libraries = result.vllm.libraries
    if libraries:
        report["vllm"]["libraries"] = dict(libraries)
        # Every probe environment runs the interpreter's CPU torch, not the CUDA torch the release pins.
        report["vllm"]["shared"] = [n for n in SHARED_LIBRARIES if n in libraries]
    if result.probe is not None:
        report["probe"] = result.probe.to_json()
    # Findings the project accepted ([[suppress]] or --baseline) and the state of both; the
    # summary above counts only `findings`, the ones that decide the exit code.
    if result.suppressed:
        report["suppressed"] = [s.to_dict() for s in result.suppressed]
    if result.unused_suppressions:
        report["unused_suppressions"] = [dict(u) for u in result.unused_suppressions]
    if result.baseline is not None:
        report["baseline"] = dict(result.baseline)
    # Round-trip so the dict handed to callers is exactly what the file will contain.
    return json.loads(json.dumps(report, default=jsonable))


def render_json(result: RunResult, rules: dict[str, Rule] | None = None) -> str:
    # Names stay exact; the controls JSON would leave raw (DEL, C1, bidi, lone surrogates) are
    # written as \u escapes, so the file is safe to print and to encode as UTF-8.
    return json_safe(json.dumps(build_report(result), indent=2, ensure_ascii=False)) + "\n"


def load_schema() -> dict[str, Any]:
    return json.loads(resources.files("mtplint.reporters").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
