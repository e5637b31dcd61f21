"""The weight-flow graph: checkpoint tensors -> parameters they fed -> parameters shared.

Nodes: ("tensor", name), ("param", model, name). Edges: "fed" (the dry-run load attributed
the tensor to the parameter) and "shared" (after load, the proposer made the draft
parameter the target's). A draft parameter is *initialized* when some tensor reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from ..probe.report import LoadResult, ProbeReport


@dataclass
class WeightFlow:
    graph: nx.DiGraph

    def initialized(self, model: str, param: str) -> bool:
        node = ("param", model, param)
        if node not in self.graph:
            return False
        # Shared parameters resolve to the target's; an edge draft -> target means
        # "this draft slot is the target parameter", so follow it forwards too.
        for target in self._resolved(node):
            if any(pred[0] == "tensor" for pred in self.graph.predecessors(target)):
                return True
        return False

    def _resolved(self, node: tuple) -> list[tuple]:
        out = [node]
        for succ in self.graph.successors(node):
            if self.graph.edges[node, succ].get("kind") == "shared":
                out.append(succ)
        return out

    def shared_with(self, model: str, param: str) -> str | None:
        node = ("param", model, param)
        if node not in self.graph:
            return None
        for succ in self.graph.successors(node):
            if self.graph.edges[node, succ].get("kind") == "shared":
                return succ[2]
        return None

    def consumers(self, tensor: str) -> list[tuple]:
        node = ("tensor", tensor)
        return list(self.graph.successors(node)) if node in self.graph else []


def build_weight_flow(report: ProbeReport) -> WeightFlow:
    """Reachability questions are about the draft; of the target, only the parameters the
    draft shares matter, so the target's ~100k tensor edges are not materialized."""
    g = nx.DiGraph()
    shared = report.wiring.shared if report.wiring is not None else {}
    shared_targets = set(shared.values())
    for model, params in report.params.items():
        for name in params:
            if model != "target" or name in shared_targets:
                g.add_node(("param", model, name))
    for model, load in report.load.items():
        keep = shared_targets if model == "target" else None
        _add_fed_edges(g, model, load, keep)
    for draft_param, target_param in shared.items():
        g.add_edge(("param", "draft", draft_param), ("param", "target", target_param), kind="shared")
    return WeightFlow(g)


def _add_fed_edges(g: nx.DiGraph, model: str, load: LoadResult, keep: set[str] | None) -> None:
    """Edges from the tensors `model` loaded to the parameters they fed (only those in
    `keep`, where given)."""
    for tensor, fed in load.fed.items():
        for p in fed:
            if keep is None or p in keep:
                g.add_edge(("tensor", tensor), ("param", model, p), kind="fed")
    # load_weights() may also report parameters it filled without a weight_loader call
    for p in load.loaded_params:
        if keep is None or p in keep:
            g.add_edge(("tensor", f"<{model} load_weights>"), ("param", model, p), kind="fed")
