"""The order rules run in, derived from the relations their files declare."""

from __future__ import annotations

import heapq

from ..core.errors import MtplintError
from .rule import Rule


def rule_order(rules: dict[str, Rule]) -> list[str]:
    """Rule codes in an order where every provider of a cause runs before the rules that
    link to it, every claimer before the catch-all that reports what is unclaimed, and every
    explicit `before` holds; ties go by code, so the order is stable."""
    after = _runs_before(rules)
    for a in rules.values():
        unknown = [c for c in a.relations.before if c not in rules]
        if unknown:
            raise MtplintError(f"relations.before names unknown rule(s) {', '.join(unknown)}", path=a.source_file)
    order = _stable_topological_order(after)
    if len(order) != len(rules):
        stuck = sorted(set(rules) - set(order))
        raise MtplintError(f"rule relations form a cycle among {', '.join(stuck)}")
    return order


def _runs_before(rules: dict[str, Rule]) -> dict[str, set[str]]:
    """code -> the codes that must run after it."""
    after: dict[str, set[str]] = {code: set() for code in rules}
    for a in rules.values():
        for b in rules.values():
            if a.code == b.code:
                continue
            feeds = set(a.relations.provides) & set(b.relations.caused_by)
            claims = set(a.relations.claims) & set(b.relations.reports_unclaimed)
            if feeds or claims or b.code in a.relations.before:
                after[a.code].add(b.code)
    return after


def _stable_topological_order(after: dict[str, set[str]]) -> list[str]:
    """Kahn's algorithm taking the smallest ready code first; codes on a cycle are left out."""
    indegree = {code: 0 for code in after}
    for targets in after.values():
        for t in targets:
            indegree[t] += 1
    ready = [c for c, n in indegree.items() if n == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        code = heapq.heappop(ready)
        order.append(code)
        for t in after[code]:
            indegree[t] -= 1
            if indegree[t] == 0:
                heapq.heappush(ready, t)
    return order
