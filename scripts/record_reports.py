"""Record (or check) the probe report of every rule case: `make record`.

    python scripts/record_reports.py                 # re-probe every case, rewrite tests/recorded/
    python scripts/record_reports.py --only ID ...   # just these cases
    python scripts/record_reports.py --check ID ...  # re-probe and compare, write nothing (exit 1 on drift)

Each case is linted through the real vLLM probe (the pinned release, or the one the case
names, installed beside it) exactly as `mtplint RECIPE ARGS` would, with a fresh probe
cache; what the probe wrote is stored beside the inputs the checks need.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support"), str(ROOT / "tests" / "checks")]

from recorded_cases import (  # noqa: E402
    PINNED_VLLM,
    case_args,
    load_cases,
    normalize,
    read_recorded,
    vllm_python_args,
    write_recorded,
)

from fixtures.build import cached_build  # noqa: E402


def probe_case(case: dict[str, Any]) -> dict[str, Any]:
    """The record of one case: its recipe, arguments, the settings the checks read, the
    inputs, and the normalized probe report."""
    from mtplint.cli.check import check_cmd
    from mtplint.config.settings import load_settings
    from mtplint.pipeline.session import lint

    path = cached_build(case["recipe"])
    args = [str(path), *case_args(case), *vllm_python_args(case.get("vllm", PINNED_VLLM))]
    args += ["-q", "--no-cache"]
    params = dict(check_cmd.make_context("check", args).params)
    params.pop("path")
    settings = load_settings(path, params)
    linted = lint(path, settings)
    return {
        "case": case["id"],
        "recipe": case["recipe"],
        "args": case["args"],
        # Paths are this machine's build directories: the fast tier fills them in again.
        "inputs": {
            **linted.inputs.to_json(),
            "path": None,
            **{k: None for k in ("target", "reference") if k in linted.inputs.to_json()},
        },
        "report": normalize(linted.report.to_json()),
    }


# A built fixture's directory (the fixture cache's, a temporary one's): its place and its
# recipe hash are where and from which generator version it was built, not what was probed.
_FIXTURE_DIR = re.compile(r"^\S*/([a-z0-9][a-z0-9.+_-]*?)-[0-9a-f]{16}$")


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report with the fixture directory a serve command names reduced to its recipe."""
    request = report.get("request") or {}
    argv = request.get("serve_argv")
    if not argv:
        return report
    argv = [_FIXTURE_DIR.sub(r"<fixture \1>", a) for a in argv]
    return {**report, "request": {**request, "serve_argv": argv}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="case ids to record")
    parser.add_argument("--check", nargs="*", default=None, help="case ids to re-probe and compare")
    opts = parser.parse_args(argv)
    wanted = opts.check if opts.check is not None else opts.only
    cases = [c for c in load_cases() if not wanted or c["id"] in wanted]
    os.environ["MTPLINT_CACHE_DIR"] = tempfile.mkdtemp(prefix="mtplint-record-")
    drifted = 0
    for case in cases:
        started = time.perf_counter()
        record = probe_case(case)
        if opts.check is not None:
            old = read_recorded(case["id"])
            same = (
                old is not None
                and _comparable(old["report"]) == _comparable(record["report"])
                and old["inputs"] == record["inputs"]
            )
            drifted += not same
            verdict = "matches" if same else "DRIFTED (run `make record`)"
        else:
            write_recorded(case["id"], record)
            verdict = "recorded"
        print(f"{case['id']:<55} {verdict} in {time.perf_counter() - started:5.1f} s", flush=True)
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
