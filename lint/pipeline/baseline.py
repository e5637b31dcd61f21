"""Baselines: `--write-baseline FILE` records a run's findings, `--baseline FILE` accepts the
findings recorded there (matched by id) so that only new ones count, and reports the entries
that no longer occur as fixed.

The file is JSON ("mtplint/baseline/v1"), one entry per finding sorted by id, so that it
diffs well under review. Each entry keeps the code and message for the reader, and a hash of
the finding's content: a baselined finding whose message or location changed still matches
by id, and is counted as changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..core.findings import Finding, RunResult, Suppressed
from ..core.regular_files import read_capped
from ..core.textsafe import json_safe, terminal_safe
from ..core.versions import __version__

SCHEMA = "mtplint/baseline/v1"
_SHOWN_FIXED = 5  # ids named in the "fixed" line; the JSON report has them all


def content_hash(f: Finding) -> str:
    loc = f.location
    body = json.dumps([f.code, f.severity, f.message, loc.file, loc.tensor, loc.config_key], ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def entry(f: Finding) -> dict[str, str]:
    return {"id": f.id, "code": f.code, "severity": f.severity, "message": f.message, "hash": content_hash(f)}


@dataclass
class Baseline:
    file: str
    entries: dict[str, dict[str, Any]]  # by finding id

    def apply(self, result: RunResult, evaluated: set[str]) -> list[str]:
        """Move the findings recorded here to result.suppressed; put matched/new/fixed on
        result.baseline. Returns info lines for stderr."""
        present = {f.id for f in result.findings} | {s.finding.id for s in result.suppressed}
        kept, matched, changed = [], 0, 0
        for f in result.findings:
            old = self.entries.get(f.id)
            if old is None:
                kept.append(f)
                continue
            matched += 1
            changed += old.get("hash") != content_hash(f)
            result.suppressed.append(Suppressed(f, "baseline", f"in baseline {self.file}", self.file))
        # An entry of a rule that did not run this time (--select/--ignore) is not fixed, just unchecked.
        fixed = [e for i, e in self.entries.items() if i not in present and str(i).split(":", 1)[0] in evaluated]
        result.findings = kept
        result.baseline = {
            "file": self.file,
            "matched": matched,
            "changed": changed,
            "new": len(kept),
            "fixed": [{k: e.get(k) for k in ("id", "code", "message")} for e in fixed],
        }
        lines = [
            f"mtplint: baseline {self.file}: {matched} finding(s) baselined"
            + (f" ({changed} changed since it was written)" if changed else "")
            + f", {len(kept)} new"
        ]
        if fixed:
            ids = ", ".join(str(e["id"]) for e in fixed[:_SHOWN_FIXED]) + (", ..." if len(fixed) > _SHOWN_FIXED else "")
            lines.append(
                f"mtplint: baseline {self.file}: {len(fixed)} "
                + ("entry no longer occurs" if len(fixed) == 1 else "entries no longer occur")
                + f" (fixed): {ids}; --write-baseline {self.file} drops them"
            )
        return [terminal_safe(line) for line in lines]


# A baseline lists one line per accepted finding: far below this even for a matrix of large checkpoints.
MAX_BASELINE_BYTES = 256 << 20


def read_baseline(file: Path) -> Baseline:
    where = str(file)
    try:
        data = json.loads(read_capped(file, MAX_BASELINE_BYTES).decode("utf-8"))
    except OSError as exc:
        raise BadInput(f"cannot read baseline: {exc.strerror or exc}", path=where) from None
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"baseline is not valid JSON: {exc}", path=where) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise BadInput(
            f'not an mtplint baseline (expected "schema": "{SCHEMA}"; write one with --write-baseline)', path=where
        )
    items = data.get("findings")
    if not isinstance(items, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str) for e in items):
        raise BadInput("baseline findings must be a list of objects with an id", path=where)
    return Baseline(where, {e["id"]: e for e in items})


def check_writable(file: Path) -> None:
    """Fail before the probe, not after it, when the baseline cannot be written."""
    parent = file.parent if str(file.parent) else Path(".")
    if file.is_dir() or not parent.is_dir() or not os.access(parent, os.W_OK):
        raise BadInput(
            "cannot write the baseline there (no such directory, not writable, or a directory)", path=str(file)
        )


def write_baseline(file: Path, findings: list[Finding], result: RunResult) -> Baseline:
    """Record `findings` in `file` (atomically) and return it as the run's baseline."""
    inputs = result.inputs.to_json(without=("path", "settings_files"))
    entries = sorted((entry(f) for f in findings), key=lambda e: e["id"])
    doc = {
        "schema": SCHEMA,
        "mtplint": __version__,
        "vllm": result.vllm.to_json(),
        "inputs": inputs,
        "findings": entries,
    }
    text = json_safe(json.dumps(doc, indent=2, ensure_ascii=False, default=str)) + "\n"
    check_writable(file)
    fd, tmp = tempfile.mkstemp(prefix=f".{file.name}.", dir=file.parent if str(file.parent) else ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, file)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise BadInput(f"cannot write the baseline: {exc.strerror or exc}", path=str(file)) from None
    return Baseline(str(file), {e["id"]: dict(e) for e in entries})
