"""The lint pipeline `mtplint check`, `fix` and `matrix` share: settings -> probe request ->
inventory + probe report -> rule checks -> findings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config.schema import LintSettings, Settings
from ..core.errors import BadInput
from ..core.findings import Finding, RunResult
from ..core.gc_pause import gc_paused
from ..core.probe_summary import ProbedVllm, ProbeSummary
from ..core.progress import settle
from ..core.run_inputs import RunInputs
from ..envs.resolve import Target, interpreter_path, probe_target
from ..inventory.model import Inventory
from ..patches.catalog import PATCHES, in_range
from ..probe import cache as probe_cache
from ..probe.memory_cap import resolve_limit
from ..probe.report import ProbeReport
from ..probe.runner import ProbeRequest, cache_inputs, check_vllm_commit, run_probe, vllm_identity
from ..probe.workers import idle_seconds
from ..view.draft_modules import DraftModule, draft_modules
from . import verdict_cache
from .draft import load_draft, speculative_request
from .gpus import resolve
from .preflight import check_config, explain_depth_zero, raise_for_config_error
from .reference import load_reference, reference_origin
from .serve_command import serve_command


@dataclass
class Linted:
    """One lint's outcome. A remembered lint (verdict_cache) comes without its inventory and probe
    report: the first read of either runs the lint in full (the probe report from its cache)."""

    _inventory: Inventory | None
    _report: ProbeReport | None
    findings: list[Finding]
    evaluated: list[dict[str, Any]]  # [{code, name, severity, summary}] of the rules run
    inputs: RunInputs
    request: Any
    vllm: ProbedVllm
    probe: ProbeSummary
    # The PATH's own inventory where it is not the one linted (--draft: the target's).
    path_inventory: Inventory | None = None
    origin: str | None = None  # the linted checkpoint's hf://ORG/NAME@COMMIT, None when local
    _relint: Callable[[], Linted] | None = None
    # The draft's module table as a remembered lint stored it (None: read from inventory and report).
    remembered_modules: list[DraftModule] | None = None

    def draft_modules(self) -> list[DraftModule]:
        """The facts of the draft's module table (-v, the job summary): a remembered lint's own,
        without running it in full."""
        if self.remembered_modules is not None:
            return self.remembered_modules
        return draft_modules(self.inventory, self.report)

    @property
    def inventory(self) -> Inventory:
        if self._inventory is None:
            self._complete()
        assert self._inventory is not None
        return self._inventory

    @property
    def report(self) -> ProbeReport:
        if self._report is None:
            self._complete()
        assert self._report is not None
        return self._report

    def _complete(self) -> None:
        assert self._relint is not None, "a lint without its inventory must know how to run in full"
        full = self._relint()
        self._inventory, self._report, self.path_inventory = full.inventory, full.report, full.path_inventory

    def result(self) -> RunResult:
        """What the reporters render."""
        return RunResult(
            findings=self.findings,
            rules_evaluated=list(self.evaluated),
            vllm=self.vllm,
            inputs=self.inputs,
            probe=self.probe,
        )


def lint(
    path: Path,
    s: Settings,
    *,
    patches: list[str] | None = None,
    fresh: bool = False,
    progress: Callable[[str], None] | None = None,
    inventory: Inventory | None = None,
) -> Linted:
    """The lint pipeline: inventory -> probe (cached) -> rule checks -> findings.
    fresh: probe again and store the new report, so a check right after is a cache hit.
    inventory: use this one instead of reading PATH (mtplint fix: a hub fix's files over its snapshot).
    An unchanged checkpoint linted again with the same settings and vLLM gets its remembered
    findings (verdict_cache) without reading its inventory or probe report."""

    # The cyclic collector paused: a lint reads and indexes hundreds of thousands of small,
    # acyclic objects (memo rows, the report's attribution), and each collection re-walked all
    # of them (DSV4-Flash cached lint: a third of its CPU time).
    try:
        with gc_paused():
            return _lint(
                path,
                s.lint,
                quiet=s.output.quiet,
                patches=patches,
                fresh=fresh,
                progress=progress,
                inventory=inventory,
                recall=True,
            )
    finally:
        settle()  # what follows (a report, an error, the next step) starts on a clean line


def _lint(
    path: Path,
    s: LintSettings,
    *,
    quiet: bool,
    patches: list[str] | None,
    fresh: bool,
    progress: Callable[[str], None] | None,
    inventory: Inventory | None,
    recall: bool,
) -> Linted:
    """prepare -> probe -> conclude, the remembered verdict consulted once the lint's whole key
    is known (the checkpoint and settings before vLLM is asked, vLLM's identity and the probe
    request after) and stored at the end."""
    gpu, patches, memory_limit = _checked_settings(s, patches)
    pre = verdict_cache.pre_inputs(path, s, patches) if recall and inventory is None and not fresh else None
    remembered = verdict_cache.candidate(pre) if pre is not None else None
    if remembered is None:
        inventory = _read_checked(path, progress, inventory)
    prep = _prepare(s, gpu, patches, memory_limit, progress, quiet)
    full = verdict_cache.full_inputs(pre, prep.identity, prep.request.key_fields()) if pre is not None else None
    if remembered is not None and full is not None:
        hit = verdict_cache.recall(remembered, full)
        if hit is not None:
            return _recalled(hit, path, s, quiet, patches, prep.request, progress)
        # Same checkpoint and settings, another vLLM: its config passed these checks before.
        inventory = _read_checked(path, progress, None)
    assert inventory is not None
    linted = _probe_and_conclude(path, s, inventory, prep, fresh, progress)
    if pre is not None and full is not None:
        verdict_cache.store(
            pre,
            full,
            linted.findings,
            linted.evaluated,
            linted.inputs,
            linted.vllm,
            linted.probe,
            linted.origin,
            (len(inventory.tensors), len(inventory.shards)),
            linted.draft_modules(),
        )
    return linted


@dataclass(frozen=True)
class _Prepared:
    """What a lint knows once its inputs are read and before vLLM is probed."""

    gpu: Any
    draft: tuple[Inventory, str | None] | None
    reference: Inventory | None
    identity: dict[str, Any]  # the probed vLLM's (runner.vllm_identity)
    request: ProbeRequest


def _checked_settings(s: LintSettings, patches: list[str] | None) -> tuple[Any, list[str], Any]:
    """(GPU, patch ids, probe memory limit): settings that are exit 2 before anything is read."""
    gpu = resolve(s.gpu, s.sm)
    patches = list(s.patches if patches is None else patches)
    unknown = [p for p in patches if p not in PATCHES]
    if unknown:
        raise BadInput(f"--with-patches: unknown patch id(s) {', '.join(unknown)}; bundled: {', '.join(PATCHES)}")
    memory_limit = resolve_limit(s.probe_memory)
    idle_seconds()  # a bad MTPLINT_WORKER_IDLE is exit 2 before anything is read or probed
    return gpu, patches, memory_limit


def _prepare(
    s: LintSettings,
    gpu: Any,
    patches: list[str],
    memory_limit: Any,
    progress: Callable[[str], None] | None,
    quiet: bool,
) -> _Prepared:
    """The draft and the reference read, the probed vLLM found (provisioned on first use) and
    checked against what was asked of it, and the probe request."""
    draft = load_draft(s, _header_progress(Path(s.draft or ""), progress))
    if draft:
        check_config(draft[0])  # the draft's bad values name its own config.json
    # Header-only and never probed: vLLM does not see it, so the probe cache key need not either.
    reference = load_reference(s, _header_progress(Path(s.reference or ""), progress))
    target = _probe_target(s, quiet)  # provisions --vllm-commit X on first use
    identity = vllm_identity(target.python)
    check_vllm_commit(target.wanted, identity)
    if identity.get("version") is None:
        raise BadInput(
            f"no vLLM is installed in {identity.get('python')} (run scripts/setup.sh, or pass --vllm-python)"
        )
    _check_patch_ranges(patches, identity["version"])
    request = _request(s, gpu, patches, target.python, draft, memory_limit)
    return _Prepared(gpu, draft, reference, identity, request)


def _recalled(
    hit: Any,
    path: Path,
    s: LintSettings,
    quiet: bool,
    patches: list[str],
    request: ProbeRequest,
    progress: Callable[[str], None] | None,
) -> Linted:
    """A remembered lint: its findings without its inventory or report, which a reader that
    needs them (-v's table, fix, verify) gets by running the lint in full."""
    if progress:
        progress(f"inventory: {hit.counts[0]:,} tensors in {hit.counts[1]} shards")
    return Linted(
        None,
        None,
        hit.findings,
        hit.evaluated,
        hit.inputs,
        request,
        vllm=hit.vllm,
        probe=replace(hit.probe, cached=True),
        origin=hit.origin,
        _relint=lambda: _lint(
            path, s, quiet=quiet, patches=patches, fresh=False, progress=None, inventory=None, recall=False
        ),
        remembered_modules=hit.modules,
    )


def _probe_and_conclude(
    path: Path,
    s: LintSettings,
    inventory: Inventory,
    prep: _Prepared,
    fresh: bool,
    progress: Callable[[str], None] | None,
) -> Linted:
    """The probe (its cache consulted unless fresh or --no-cache), vLLM's config-time refusals
    as bad input, and the rule checks over its report."""
    request = prep.request
    use_cache = not (fresh or s.no_cache)
    report = run_probe(inventory, request, identity=prep.identity, use_cache=use_cache, progress=progress)
    raise_for_config_error(inventory, report.config_error)
    if fresh:
        probe_cache.store(cache_inputs(inventory, request, prep.identity), report)
    explain_depth_zero(inventory, report.config_error)  # after the store: the cache keeps vLLM's words
    check_pinned(s, report)
    read = report.request  # what vLLM read: a serve command's TP, PP and N as vLLM parses them
    inputs = RunInputs(
        path=inventory.origin or str(path),  # a hub repository as hf://ORG/NAME@COMMIT
        gpu=prep.gpu.key,
        sm=f"{prep.gpu.sm[0]}.{prep.gpu.sm[1]}",
        num_speculative_tokens=read.num_speculative_tokens,
        tensor_parallel_size=read.tensor_parallel_size,
        pipeline_parallel_size=read.pipeline_parallel_size,
        patches=tuple(request.patches),
    )
    linted = conclude(path, inventory, report, request, s, inputs, draft=prep.draft, reference=prep.reference)
    # What the probed interpreter holds beside vLLM (each environment's own pins): for the report.
    linted.vllm = replace(linted.vllm, libraries=dict(prep.identity.get("libraries") or {}))
    return linted


def check_pinned(s: LintSettings, report: ProbeReport) -> None:
    """mtplint's own deployment options given beside a serve command must be what vLLM reads
    from the command (its flags win over them): otherwise the lint would answer another question."""
    if not s.serve_pinned or report.serve_args_rejected:
        return
    read = report.request
    seen = {
        "tensor_parallel_size": read.tensor_parallel_size,
        "pipeline_parallel_size": read.pipeline_parallel_size,
        "num_speculative_tokens": read.num_speculative_tokens,
        "kv_cache_dtype": (read.serve_args or {}).get("kv_cache_dtype"),
        "method": (read.speculative or {}).get("method", "mtp"),
    }
    for key, value in s.serve_pinned:
        if key == "method" and str(value).endswith("_mtp"):
            value = "mtp"  # vLLM rewrites a family's MTP method to mtp
        if key in seen and seen[key] != value:
            option = "--" + key.replace("_", "-")
            raise BadInput(
                f"vllm serve command: vLLM {report.vllm.version} reads {key} {seen[key]} from it; "
                f"the command line's {option} {value} differs (the command's flags are the deployment)"
            )


def _check_patch_ranges(patches: list[str], version: str) -> None:

    for p in patches:
        if not in_range(version, PATCHES[p].vllm):
            raise BadInput(
                f"--with-patches: {p} applies to vLLM {PATCHES[p].vllm}; the probed vLLM is "
                f"{version} ({PATCHES[p].summary})"
            )


def _request(
    s: LintSettings,
    gpu: Any,
    patches: list[str],
    python: str | None,
    draft: tuple[Inventory, str | None] | None,
    memory_limit: Any,
) -> ProbeRequest:
    return ProbeRequest(
        sm=list(gpu.sm),
        gpu_name=gpu.name,
        gpu_memory=gpu.memory,
        arch=gpu.arch,
        num_speculative_tokens=s.num_speculative_tokens,
        tensor_parallel_size=s.tensor_parallel_size,
        pipeline_parallel_size=s.pipeline_parallel_size,
        patches=patches,
        serve_args={"kv_cache_dtype": s.kv_cache_dtype} if s.kv_cache_dtype else {},
        python=python,
        timeout=s.probe_timeout,
        elide=not s.no_elision,
        trust_remote_code=bool(s.trust_remote_code),
        memory_limit=memory_limit,
        speculative=speculative_request(s, draft, python),
        serve_argv=list(s.serve_argv or []),
        serve_env=dict(s.serve_env),
        draft_inventory=draft[0] if draft else None,
        serve_model=s.serve_model,
    )


def _read_checked(path: Path, progress: Callable[[str], None] | None, given: Inventory | None) -> Inventory:
    """PATH's inventory (or the one given), its config checked before vLLM sees it (bad values
    and absurd sizes are exit 2)."""
    from ..inventory.checkpoint import load_inventory

    inventory = given or load_inventory(path, _header_progress(path, progress))
    if progress:
        progress(f"inventory: {len(inventory.tensors):,} tensors in {len(inventory.shards)} shards")
    check_config(inventory)
    return inventory


def conclude(
    path: Path,
    inventory: Inventory,
    report: ProbeReport,
    request: Any,
    s: LintSettings,
    inputs: RunInputs,
    *,
    draft: tuple[Inventory, str | None] | None,
    reference: Inventory | None,
) -> Linted:
    """From a probe report to the lint's findings: what lint() does once the probe answered, and
    what the fast test tier replays on recorded reports (tests/checks/test_rule_cases_fast.py)."""
    inputs = inputs.replace(reference=reference_origin(reference, s.reference))
    target_inventory = inventory
    if draft:
        # The draft is the checkpoint linted: findings name its files.
        path, inventory = Path(s.draft or ""), draft[0]
        # The method vLLM resolved (the probe records it), else the one asked for.
        method = (report.request.speculative or {}).get("method") or draft[1]
        inputs = inputs.replace(path=inventory.origin or str(path), target=inputs.path, method=method)
    findings, evaluated = judge(
        path, inventory, report, inputs, request, s, reference=reference, target=target_inventory if draft else None
    )
    rules = [{"code": r.code, "name": r.name, "severity": r.severity, "summary": r.summary} for r in evaluated]
    return Linted(
        inventory,
        report,
        findings,
        rules,
        inputs,
        request,
        vllm=ProbedVllm(report.vllm.version, report.vllm.commit),
        probe=ProbeSummary(report.cached, round(report.seconds, 2)),
        path_inventory=target_inventory,
        origin=inventory.origin,
    )


def read_once(path: Path, s: Settings, progress: Callable[[str], None] | None = None) -> tuple[Inventory, Settings]:
    """PATH's inventory for lints that share it (a matrix's cells), its config checked as a
    lint checks it, and the settings with a hub --draft pinned to the revision read here, so
    every cell lints the same commits."""
    from ..inventory.checkpoint import load_inventory

    inventory = load_inventory(path, _header_progress(path, progress))
    check_config(inventory)
    draft = load_draft(s.lint, _header_progress(Path(s.lint.draft or ""), progress))
    if draft:
        check_config(draft[0])
        s = s.replace(draft=draft[0].origin or s.lint.draft)
    return inventory, s


def provision(s: Settings) -> None:
    """Provision (or find) the probe environment a lint with these settings probes. A matrix
    calls it for each vLLM before its cells run side by side: two lints must never install
    one environment at the same time."""
    _probe_target(s.lint, s.output.quiet)


def _probe_target(s: LintSettings, quiet: bool) -> Target:
    return probe_target(
        interpreter_path(s.vllm_python), vllm_commit=s.vllm_commit, vllm_source=s.vllm_source, quiet=quiet
    )


def _header_progress(path: Path, progress: Callable[[str], None] | None) -> Callable[[int, int], None] | None:
    """Header reading with a count, once a second while it lasts (a local read is done before
    the first; a hub repository's range requests take longer)."""
    if progress is None:
        return None
    import time

    last = [time.perf_counter()]

    def headers(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= 1.0:
            last[0] = now
            progress(f"reading safetensors headers in {path}: {done}/{total}")

    return headers


def judge(
    path: Path,
    inventory: Inventory,
    report: ProbeReport,
    inputs: RunInputs,
    request: Any,
    s: LintSettings,
    *,
    reference: Inventory | None = None,
    target: Inventory | None = None,
) -> tuple[list[Finding], list[Any]]:
    """The rule checks over one probe report: findings, with the fixes this mtplint ships
    and the exact serve command for the inputs linted. No vLLM here: the fast test tier
    runs this on recorded reports. reference: the --reference checkpoint's inventory."""
    from ..engine.evaluate import evaluate
    from .recommend import recommend

    findings, evaluated = evaluate(
        inventory,
        report,
        inputs,
        select=list(s.select) if s.select is not None else None,
        ignore=list(s.ignore) if s.ignore is not None else None,
        recommend=recommend,
        reference=reference,
        target=target,
    )
    for f in findings:
        if inputs.separate_draft:
            # The fixes rewrite a checkpoint linted on its own and patch vLLM's MTP drafts:
            # neither applies to a separate draft (its re-lint would lose the target).
            f.fixes.patches, f.fixes.artifact = [], []
        if f.fixes.patches:
            f.fixes.serve = serve_command(inputs.path or path, request, f.fixes.patches)
    return findings, evaluated
