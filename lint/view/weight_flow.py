"""The weight flow: checkpoint tensors -> parameters they fed -> parameters shared.

A parameter is ("param", model, name); a tensor is ("tensor", name). "fed" links (the dry-run
load attributed the tensor to the parameter) and "shared" links (after load, the proposer made
the draft parameter the target's). A draft parameter is *initialized* when some tensor reaches
it. Plain dicts: the questions are one hop or two, and a graph library cost a quarter of a
cached lint in its import alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..probe.report import LoadResult, ProbeReport

Node = tuple[str, ...]


@dataclass
class WeightFlow:
    params: set[Node] = field(default_factory=set)
    fed_by: dict[Node, set[Node]] = field(default_factory=dict)  # parameter -> tensors that fed it
    shared: dict[Node, Node] = field(default_factory=dict)  # draft parameter -> the target's it is

    def initialized(self, model: str, param: str) -> bool:
        node = ("param", model, param)
        if node not in self.params:
            return False
        # Shared parameters resolve to the target's: "this draft slot is the target parameter".
        return any(self.fed_by.get(n) for n in (node, self.shared.get(node)) if n is not None)

    def _feed(self, tensor: Node, param: Node) -> None:
        self.params.add(param)
        self.fed_by.setdefault(param, set()).add(tensor)


def build_weight_flow(report: ProbeReport) -> WeightFlow:
    """Reachability questions are about the draft; of the target, only the parameters the
    draft shares matter, so the target's ~100k tensor links are not materialized."""
    flow = WeightFlow()
    shared = report.wiring.shared if report.wiring is not None else {}
    shared_targets = set(shared.values())
    for model, params in report.params.items():
        for name in params:
            if model != "target" or name in shared_targets:
                flow.params.add(("param", model, name))
    for model, load in report.load.items():
        keep = shared_targets if model == "target" else None
        _add_fed(flow, model, load, keep)
    for draft_param, target_param in shared.items():
        draft_node, target_node = ("param", "draft", draft_param), ("param", "target", target_param)
        flow.params.update((draft_node, target_node))
        flow.shared[draft_node] = target_node
    return flow


def _add_fed(flow: WeightFlow, model: str, load: LoadResult, keep: set[str] | None) -> None:
    """Links from the tensors `model` loaded to the parameters they fed (only those in `keep`,
    where given)."""
    for tensor, fed in load.fed.items():
        for p in fed:
            if keep is None or p in keep:
                flow._feed(("tensor", tensor), ("param", model, p))
    # load_weights() may also report parameters it filled without a weight_loader call
    for p in load.loaded_params:
        if keep is None or p in keep:
            flow._feed(("tensor", f"<{model} load_weights>"), ("param", model, p))
