"""The probe report's schema version and the minimal shape every consumer relies on.

SCHEMA_VERSION is the one number to bump when the report format or what the child records
changes: it is part of the probe cache key and of every cache entry. The child writes
REPORT_SCHEMA (`mtplint/probe/v1`) into the report itself.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 1
REPORT_SCHEMA = f"mtplint/probe/v{SCHEMA_VERSION}"

# Written by the child whether or not the models could be constructed.
_ALWAYS = {"schema": str, "vllm": dict, "request": dict, "patches": list, "timings": dict}
# Present when construction got past the config stage (no config_error); what the checks read.
_BUILT = {
    "models": dict,
    "quant": dict,
    "construction_errors": dict,
    "decisions": list,
    "params": dict,
    "load": dict,
    "kernels": dict,
}
_OPTIONAL = {"config_error": dict, "wiring": dict, "exclusions": dict, "draft_hf_config": dict}


def problem(report: Any) -> str | None:
    """Why `report` is not a probe report of this schema, or None when it has the shape."""
    if not isinstance(report, dict):
        return f"not an object but {type(report).__name__}"
    if report.get("schema") != REPORT_SCHEMA:
        return f"schema {report.get('schema')!r:.40}, expected {REPORT_SCHEMA!r}"
    required = set(_ALWAYS) | (set(_BUILT) if report.get("config_error") is None else set())
    for key, kind in {**_ALWAYS, **_BUILT, **_OPTIONAL}.items():
        if key not in report:
            if key in required:
                return f"missing {key!r}"
        elif not isinstance(report[key], kind) and not (key in _OPTIONAL and report[key] is None):
            return f"{key!r} is {type(report[key]).__name__}"
    return None
