"""`mtplint rule CODE`: the rule's documentation, rendered as Markdown-flavoured text."""

from __future__ import annotations

from .rule import Rule


def render_rule(rule: Rule) -> str:
    ex = rule.explanation
    lines = [f"# {rule.code} {rule.name} ({rule.severity})", "", rule.summary, ""]
    for title, body in (
        ("What it checks", ex.what),
        ("Why it breaks", ex.why),
        ("Example", ex.example),
        ("Fix", ex.fix),
    ):
        if body.strip():
            lines += [f"## {title}", "", body.strip(), ""]
    fixes = rule.fixes
    if fixes.get("patches") or fixes.get("artifact"):
        lines += ["## Bundled fixes", ""]
        for pid in fixes.get("patches", []):
            lines.append(f"- runtime patch `{pid}`: MTPLINT_PATCHES={pid} vllm serve ...")
        for fid in fixes.get("artifact", []):
            lines.append(f"- artifact fix `{fid}`: mtplint fix PATH --only {fid}")
        lines.append("")
    applies = rule.applies_to.describe()
    if applies:
        lines += ["## Applies to", ""] + [f"- {k}: {v}" for k, v in applies.items()] + [""]
    if rule.references:
        lines += ["## References", ""] + [f"- {r}" for r in rule.references] + [""]
    return "\n".join(lines).rstrip() + "\n"
