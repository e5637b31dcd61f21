"""Rule cases and their recorded probe reports, shared by the fast tier, the real-probe tier
and `make record` (scripts/record_reports.py).

A case (tests/cases/*.toml) lints one fixture recipe with some arguments and states which
rules fire and which stay silent; a case with `draft_recipe` lints that recipe as a separate
draft of the target `recipe` (`mtplint TARGET --draft DRAFT`), and a case with `reference_recipe`
compares `recipe`'s MTP block with that recipe's (`mtplint RECIPE --reference SOURCE`: the
reference is never probed, so only the checks see it). Its recorded report is what the real vLLM probe wrote for
it (tests/recorded/<case id>.json.xz), so the fast tier can run every case's checks
in-process without importing vLLM; a drift test re-probes a sample and compares.
"""

from __future__ import annotations

import json
import lzma
import os
import tomllib
from pathlib import Path
from typing import Any

from paths import ROOT

CASES_DIR = ROOT / "tests" / "cases"
RECORDED_DIR = ROOT / "tests" / "recorded"
PINNED_VLLM = "0.33.0"
# What differs between two probes of the same inputs (timings, memory, cache state), as a
# fresh report's JSON form has it: a recorded report stays a valid report.
VOLATILE = {"seconds": 0.0, "cached": False, "timings": {}, "peak_rss_mib": None}


# A case's keys and the type of each value: a key outside this table (a typo) would test
# nothing, so it is an error, as is a value of another type.
CASE_KEYS: dict[str, Any] = {
    "id": str,
    "recipe": str,
    "args": list,  # of str: `mtplint RECIPE ARGS`
    "fires": list,  # rule codes that must fire
    "silent": list,  # rule codes that must not
    "message_contains": dict,  # {code: text one of its messages holds}
    "message_absent": dict,  # {code: text none of its messages holds}
    "evidence_contains": dict,  # {code: text its evidence holds}
    "caused_by": dict,  # {code: the code its finding links to}
    "patches_recommended": dict,  # {code: [patch ids]}
    "max_errors": int,
    "max_root_errors": int,  # errors no other finding explains (one root cause reads as one story)
    "vllm": str,  # another release than the pin
    "draft_recipe": str,
    "reference_recipe": str,
}
REQUIRED = ("id", "recipe", "args", "fires", "silent")


class CaseError(ValueError):
    pass


def check_case(case: Any, where: str) -> None:
    """A case as tests/cases/*.toml must write it; CaseError naming the file, the case and the key."""
    if not isinstance(case, dict):
        raise CaseError(f"{where}: a [[case]] must be a table")
    name = f"{where} case {case.get('id', '?')!r}"
    unknown = sorted(set(case) - set(CASE_KEYS))
    if unknown:
        raise CaseError(f"{name}: unknown key(s) {', '.join(unknown)}; known: {', '.join(CASE_KEYS)}")
    missing = [k for k in REQUIRED if k not in case]
    if missing:
        raise CaseError(f"{name}: missing {', '.join(missing)}")
    for key, value in case.items():
        if not isinstance(value, CASE_KEYS[key]) or isinstance(value, bool) != (CASE_KEYS[key] is bool):
            raise CaseError(f"{name}: {key} must be a {CASE_KEYS[key].__name__}, not {type(value).__name__}")


def load_cases(directory: Path = CASES_DIR) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for f in sorted(directory.glob("*.toml")):
        data = tomllib.loads(f.read_text())
        if set(data) != {"case"}:
            raise CaseError(f"{f.name}: only [[case]] tables belong in a case file, not {sorted(set(data) - {'case'})}")
        for case in data["case"]:
            check_case(case, f.name)
            if case["id"] in seen:
                raise CaseError(f"{f.name}: case id {case['id']!r} is also in {seen[case['id']]}")
            seen[case["id"]] = f.name
            cases.append({**case, "file": f.name})
    return cases


def normalize(report: dict[str, Any]) -> dict[str, Any]:
    """A probe report's JSON form (ProbeReport.to_json()) with its volatile fields reset."""
    return {k: VOLATILE.get(k, v) for k, v in report.items()}


def recorded_path(case_id: str) -> Path:
    return RECORDED_DIR / f"{case_id}.json.xz"


def write_recorded(case_id: str, record: dict[str, Any]) -> None:
    RECORDED_DIR.mkdir(parents=True, exist_ok=True)
    data = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    tmp = recorded_path(case_id).with_suffix(".tmp")
    tmp.write_bytes(lzma.compress(data, preset=9))
    tmp.replace(recorded_path(case_id))


def read_recorded(case_id: str) -> dict[str, Any] | None:
    path = recorded_path(case_id)
    if not path.is_file():
        return None
    return json.loads(lzma.decompress(path.read_bytes()))


def recorded_report(case_id: str) -> tuple[dict[str, Any], Any] | None:
    """(the record's inputs, its report as ProbeReport.from_json decodes it), or None when the
    case has no recording. The decoded report is kept under build/recorded-memo, keyed by the
    recording's bytes and the codec's source (lint/probe/report.py): decompressing, parsing and
    checking the largest recordings was a fifth of the fast tier's time. test_probe_report
    decodes every recording from its JSON."""
    import hashlib
    import pickle

    from mtplint.probe.report import ProbeReport

    path = recorded_path(case_id)
    if not path.is_file():
        return None
    blob = path.read_bytes()
    codec = ROOT / "lint" / "probe" / "report.py"
    key = hashlib.sha256(blob + b"\0" + codec.read_bytes()).hexdigest()
    memo = ROOT / "build" / "recorded-memo" / f"{case_id}.{key[:24]}.pickle"
    try:
        with memo.open("rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        pass
    record = json.loads(lzma.decompress(blob))
    decoded = (record["inputs"], ProbeReport.from_json(record["report"]))
    memo.parent.mkdir(parents=True, exist_ok=True)
    for old in memo.parent.glob(f"{case_id}.*.pickle"):
        old.unlink(missing_ok=True)  # an older recording's or codec's
    tmp = memo.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(pickle.dumps(decoded, protocol=pickle.HIGHEST_PROTOCOL))
    tmp.replace(memo)
    return decoded


def vllm_python_args(version: str) -> list[str]:
    """The options that probe another vLLM release than the pin: provisioned into the
    environment store on first use (lint/envs/), like any user's `--vllm-commit`."""
    return [] if version == PINNED_VLLM else ["--vllm-commit", version]


def draft_args(case: dict[str, Any]) -> list[str]:
    """`--draft DIR` for a case that lints a separate draft (`draft_recipe`) against its target
    (`recipe`), as `mtplint TARGET --draft DRAFT` does; nothing for any other case."""
    if not case.get("draft_recipe"):
        return []
    from fixtures.build import cached_build

    return ["--draft", str(cached_build(case["draft_recipe"]))]


def reference_args(case: dict[str, Any]) -> list[str]:
    """`--reference DIR` for a case that compares its recipe with a source (`reference_recipe`)."""
    if not case.get("reference_recipe"):
        return []
    from fixtures.build import cached_build

    return ["--reference", str(cached_build(case["reference_recipe"]))]


def case_args(case: dict[str, Any]) -> list[str]:
    """Every argument a case lints its recipe with, besides the vLLM it is probed with."""
    return [*case["args"], *draft_args(case), *reference_args(case)]


def release_env(version: str) -> Path:
    """The environment directory of a vLLM release (site/, python), provisioned on first use."""
    from mtplint.envs.resolve import release_env as provisioned

    env = provisioned(version)
    assert env is not None, f"{version} is the pinned release: it has no environment of its own"
    return env.path


def assert_case(case: dict[str, Any], rc: int, report: dict[str, Any]) -> None:
    """What a case states about a lint's JSON report (the `--format json` document)."""
    findings = report["findings"]
    codes = {f["code"] for f in findings}
    for code in case["fires"]:
        assert code in codes, f"{code} did not fire; findings: {sorted(codes)}"
    for code in case["silent"]:
        assert code not in codes, f"{code} fired: {[f['message'] for f in findings if f['code'] == code]}"
    if "max_errors" in case:
        errors = [f for f in findings if f["severity"] == "error"]
        assert len(errors) <= case["max_errors"], [f["message"] for f in errors]
        assert rc == 0
    if "max_root_errors" in case:
        roots = [f for f in findings if f["severity"] == "error" and not f["caused_by"]]
        assert len(roots) <= case["max_root_errors"], [f["message"] for f in roots]
    for code, needle in case.get("message_contains", {}).items():
        assert any(needle in f["message"] for f in findings if f["code"] == code), needle
    for code, needle in case.get("message_absent", {}).items():
        assert not any(needle in f["message"] for f in findings if f["code"] == code), needle
    for code, needle in case.get("evidence_contains", {}).items():
        assert any(
            needle in json.dumps(f["evidence"]) or needle in f["message"] for f in findings if f["code"] == code
        ), needle
    ids = {f["id"]: f for f in findings}
    for code, cause_code in case.get("caused_by", {}).items():
        assert any(
            f["caused_by"] and ids[f["caused_by"]]["code"] == cause_code for f in findings if f["code"] == code
        ), f"{code} not linked to {cause_code}"
    for code, patches in case.get("patches_recommended", {}).items():
        assert any(f["fixes"]["patches"] == patches for f in findings if f["code"] == code), [
            f["fixes"] for f in findings if f["code"] == code
        ]
    assert report["vllm"]["version"] == case.get("vllm", PINNED_VLLM)
