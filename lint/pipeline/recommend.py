"""Which of a rule's fixes to recommend for one finding: the artifact fixes its rule declares
(narrowed by the hit), and only the runtime patches this mtplint ships that cover the finding's
model, module and the probed vLLM version. Sits above the engine, beside the patches."""

from __future__ import annotations

from ..checks.context import Hit
from ..core.findings import Fixes
from ..engine.evaluate import artifact_fixes
from ..engine.rule import Rule
from ..patches import catalog as patch_catalog


def recommend(rule: Rule, hit: Hit, vllm_version: str) -> Fixes:
    model = hit.evidence.get("model") or hit.fields.get("model")
    path = next((hit.fields[k] for k in ("module", "param") if hit.fields.get(k) is not None), None)
    return Fixes(
        patches=patch_catalog.recommendable(rule.fixes.get("patches", []), vllm_version, model, path),
        artifact=artifact_fixes(rule, hit),
    )
