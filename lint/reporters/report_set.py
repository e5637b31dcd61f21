"""Several checkpoints in one report (`mtplint check A B hf://org/x`): each checkpoint's own
report, combined into one document per format.

- text: each checkpoint's report under a `==> PATH <==` heading, then one line summing up;
- json: `{"schema": "mtplint/report-set/v1", "mtplint", "reports": [v1 report, ...], "not_linted"}`
  (report-set.schema.json, docs/report-json.md);
- sarif: one log, one run per checkpoint, each with its own code-scanning category;
- junit: one testsuite per checkpoint, (classname, name) unique across them;
- github: each checkpoint's workflow commands in a log group, then the line summing up.

A PATH that could not be linted (bad input, probe failure) is a NotLinted entry: named in
the text, JSON, JUnit and GitHub documents, left out of SARIF (an empty run would close the
checkpoint's open alerts). Pure functions: the command line (lint/cli/check_many.py) lints and writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..core.findings import SEVERITIES, SEVERITY_RANK, RunResult
from ..core.textsafe import json_safe, terminal_safe
from ..core.versions import __version__
from . import FORMATS, render
from .common import checkpoint_name, plural
from .lines import display_path

if TYPE_CHECKING:
    from ..engine.rule import Rule
    from .modules import ModuleRow

SCHEMA_ID = "mtplint/report-set/v1"
SCHEMA_FILE = "report-set.schema.json"


@dataclass(frozen=True)
class Checked:
    """One checkpoint that was linted: its result and what its single-path report is rendered with."""

    given: str  # the PATH as given on the command line
    result: RunResult
    uri_prefix: str = ""  # the checkpoint relative to the repository root (sarif, github)
    modules: list[ModuleRow] | None = None  # the draft's module table (full text, job summary)
    fail_on: str = "error"


@dataclass(frozen=True)
class NotLinted:
    """A PATH that ended in an error before its report: the line printed for it, its exit code."""

    given: str
    exit_code: int
    message: str


Entry = Checked | NotLinted


def worst_exit(codes: list[int]) -> int:
    """The exit code of several lints: 3 (internal or probe failure) > 2 (bad input) > 1
    (findings) > 0. An interrupt (128 + signal) ends the run before it gets here."""
    return max(codes, default=0)


def _name(entry: Entry) -> str:
    return entry.given if isinstance(entry, NotLinted) else checkpoint_name(entry.result)


def labels(entries: list[Entry]) -> list[str]:
    """Each entry's name (the checkpoint as the report names it), made unique: the same PATH given
    twice becomes `PATH` and `PATH (2)`, so that suites, groups and categories stay apart."""
    out: list[str] = []
    for entry in entries:
        base = label = _name(entry)
        n = 1
        while label in out:
            n += 1
            label = f"{base} ({n})"
        out.append(label)
    return out


def _verdict(entry: Entry) -> str:
    if isinstance(entry, NotLinted):
        return "not linted"
    worst = max((SEVERITY_RANK.get(f.severity, 0) for f in entry.result.findings), default=-1)
    if worst < 0:
        return "clean"
    severity = next(s for s in SEVERITIES if SEVERITY_RANK[s] == worst)
    return "with info" if severity == "info" else f"with {severity}s"


_VERDICTS = ("with errors", "with warnings", "with info", "clean", "not linted")


def summary(entries: list[Entry]) -> str:
    """`3 checkpoints: 1 with errors, 2 clean`: each checkpoint by its most severe finding (the
    findings that count, as in its own summary line), or not linted."""
    verdicts = [_verdict(e) for e in entries]
    parts = [f"{verdicts.count(v)} {v}" for v in _VERDICTS if v in verdicts]
    return f"{plural(len(entries), 'checkpoint')}: {', '.join(parts)}"


def render_set(
    entries: list[Entry],
    fmt: str,
    rules: dict[str, Rule],
    *,
    color: bool = False,
    full: bool = False,
    statistics: bool = False,
) -> str:
    """The one document of format `fmt` for every entry (in the order given)."""
    if fmt == "text":
        return render_text_set(entries, rules, color=color, full=full, statistics=statistics)
    if fmt == "json":
        return json_safe(json.dumps(build_report_set(entries), indent=2, ensure_ascii=False)) + "\n"
    if fmt == "sarif":
        return json_safe(json.dumps(build_sarif_set(entries, rules), indent=2)) + "\n"
    if fmt == "junit":
        return render_junit_set(entries)
    if fmt == "github":
        return render_github_set(entries, rules)
    raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _checked(entries: list[Entry]) -> list[tuple[str, Checked]]:
    return [(label, e) for label, e in zip(labels(entries), entries, strict=True) if isinstance(e, Checked)]


def _heading_path(label: str) -> str:
    return label if "://" in label else display_path(label, "")


def render_text_set(
    entries: list[Entry], rules: dict[str, Rule], *, color: bool = False, full: bool = False, statistics: bool = False
) -> str:
    from .color import painter

    paint = painter(color)
    sections = []
    for label, entry in zip(labels(entries), entries, strict=True):
        heading = paint("path", terminal_safe(f"==> {_heading_path(label)} <=="))
        if isinstance(entry, NotLinted):
            body = terminal_safe(entry.message) + "\n"
        else:
            body = render(
                entry.result, "text", rules, color=color, full=full, statistics=statistics, modules=entry.modules
            )
        sections.append(f"{heading}\n{body}")
    return "\n".join([*sections, summary(entries)]) + "\n"


def build_report_set(entries: list[Entry]) -> dict[str, Any]:
    from .json_report import build_report

    return {
        "schema": SCHEMA_ID,
        "mtplint": __version__,
        "reports": [build_report(e.result) for e in entries if isinstance(e, Checked)],
        "not_linted": [
            {"path": e.given, "exit_code": e.exit_code, "message": e.message}
            for e in entries
            if isinstance(e, NotLinted)
        ],
    }


def load_set_schema() -> dict[str, Any]:
    """The set's JSON Schema; its reports reference report.schema.json by that schema's $id."""
    return json.loads(resources.files("mtplint.reporters").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def category_key(entry: Checked) -> str:
    """What tells a checkpoint's SARIF run apart from the others' in one log: its path relative
    to the repository root, else the PATH as given (`hf:org/name` for a hub repository, without
    the resolved commit, so that the category survives a new revision)."""
    key = entry.uri_prefix.strip("/") or entry.given.rstrip("/") or entry.given
    return key.replace("://", ":")


def build_sarif_set(entries: list[Entry], rules: dict[str, Rule]) -> dict[str, Any]:
    from .sarif import automation_id, build_sarif

    runs, seen = [], set()
    doc: dict[str, Any] = {}
    for _label, entry in _checked(entries):
        doc = build_sarif(entry.result, rules, uri_prefix=entry.uri_prefix)
        run = doc["runs"][0]
        key, n = category_key(entry), 1
        while automation_id(entry.result, key if n == 1 else f"{key}-{n}") in seen:
            n += 1
        category = automation_id(entry.result, key if n == 1 else f"{key}-{n}")
        seen.add(category)
        run["automationDetails"] = {"id": category}
        runs.append(run)
    return {**doc, "runs": runs}


def render_junit_set(entries: list[Entry]) -> str:
    from junit_xml import TestCase, TestSuite, to_xml_report_string

    from .junit import build_suite

    suites = []
    for label, entry in zip(labels(entries), entries, strict=True):
        if isinstance(entry, Checked):
            suites.append(build_suite(entry.result, fail_on=entry.fail_on, label=label))
            continue
        case = TestCase(name=terminal_safe(f"lint [{label}]"), classname="mtplint")
        case.add_error_info(message=terminal_safe(entry.message), error_type=f"exit {entry.exit_code}")
        suites.append(TestSuite(name=terminal_safe(label), test_cases=[case]))
    return to_xml_report_string(suites, encoding="utf-8")


def render_github_set(entries: list[Entry], rules: dict[str, Rule]) -> str:
    from .github import ANNOTATION_LIMIT, escape_data, escape_property, render_github

    lines: list[str] = []
    # A PATH not linted at all comes first: GitHub keeps only the first 10 error annotations of a step.
    for label, entry in zip(labels(entries), entries, strict=True):
        if isinstance(entry, NotLinted):
            title = escape_property(terminal_safe(f"mtplint: {label} not linted"))
            lines.append(f"::error title={title}::{escape_data(terminal_safe(entry.message))}")
    for label, entry in _checked(entries):
        # A log group per checkpoint: its annotations still show, its summary line folds under its name.
        lines.append(f"::group::{escape_data(terminal_safe(f'mtplint: {label}'))}")
        lines += render_github(entry.result, rules, uri_prefix=entry.uri_prefix).splitlines()
        lines.append("::endgroup::")
    # GitHub's limit is per step, so over all checkpoints; one over it alone already said so.
    per_entry = [_annotation_counts([e]) for e in entries]
    if not any(n > ANNOTATION_LIMIT for c in per_entry for n in c.values()) and any(
        n > ANNOTATION_LIMIT for n in _annotation_counts(entries).values()
    ):
        lines.append(
            f"mtplint: GitHub shows at most {ANNOTATION_LIMIT} annotations per level per step; "
            "the job summary lists every finding."
        )
    lines.append(summary(entries))
    return "\n".join(lines) + "\n"


def _annotation_counts(entries: list[Entry]) -> dict[str, int]:
    counts: dict[str, int] = dict.fromkeys(SEVERITIES, 0)
    for e in entries:
        if isinstance(e, NotLinted):
            counts["error"] += 1
        else:
            for f in e.result.findings:
                counts[f.severity] = counts.get(f.severity, 0) + 1
    return counts


def step_summary_set(entries: list[Entry], rules: dict[str, Rule]) -> str:
    """The GitHub job summary: each checkpoint's own section, in the order given."""
    from .github import _cell, _code, step_summary

    out = []
    for label, entry in zip(labels(entries), entries, strict=True):
        if isinstance(entry, Checked):
            out.append(step_summary(entry.result, rules, entry.modules))
        else:
            out.append(f"## mtplint: `{_code(label)}`\n\nnot linted: {_cell(entry.message)}\n")
    return "".join(out)
