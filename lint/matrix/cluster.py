"""`mtplint matrix PATH... --cluster ADDRESS`: every checkpoint x cell as a Ray actor task on an
existing Ray cluster, streamed into the report a local matrix writes.

Placement: one CellRunner actor per node and vLLM (and per whether its cells read the hub, the
only actors handed a hub token), created on first need and kept for the matrix; a node with a free
slot takes a cell of a vLLM it already runs, so each node provisions a release once and keeps one
warm probe worker for it. A node runs as many cells at once as it has CPUs (at most 4, or
--jobs): the same cap as the local pool's. A cell whose actor or node dies is queued again,
for another node where there is one (at most MAX_TRIES tries); a result is kept once, by its
index. A cell's own error (bad input, a probe failure) fails the matrix as it would locally:
the first in the report's order, no new cell started after it. Ctrl-C, SIGTERM or any error:
every actor is killed (its running cells and probes with it) before the driver disconnects."""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import BadInput, ProbeFailure
from .cells import Cell, Target, Unit, label, round_robin, units_of

MAX_TRIES = 3  # a cell's worker or node died this many times: the matrix fails (exit 3)
MAX_PER_NODE = 4  # the local pool's cap: past four probes a node's workers crowd each other
HUB_TOKEN = "HF_TOKEN"
CACHE_SECRET = "MTPLINT_CACHE_SECRET"


def run_on_cluster(
    targets: list[Target],
    address: str,
    progress: Callable[[str], None] | None,
    *,
    jobs: int | None = None,
) -> list[Cell]:
    ray = import_ray()
    units = units_of(targets)
    paths = [_remote_path(t) for t in targets]
    connect(ray, address)
    try:
        from ..core.signals import terminating_signals_raise

        with terminating_signals_raise():
            return _Run(ray, targets, units, paths, progress, jobs).run()
    finally:
        ray.shutdown()


def import_ray() -> Any:
    # Before Ray is imported: its usage statistics are never collected or sent from here.
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        import ray
    except ImportError:
        raise BadInput("--cluster needs Ray: install mtplint[cluster] (pip install 'mtplint[cluster]')") from None
    return ray


def connect(ray: Any, address: str) -> None:
    """Join the cluster as a driver: Ray's own log lines and the workers' output stay out of
    mtplint's stderr (a worker's stray print must not reach a report piped from stdout)."""
    import logging

    _reachable(address)
    _keep_stdout_for_the_report()
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
    except ImportError as exc:  # ray://: Ray Client needs ray[client] (grpcio), not in the core wheel
        raise BadInput(f"--cluster {address}: {exc} (a ray:// address needs pip install 'ray[client]')") from None
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise BadInput(f"--cluster {address}: cannot connect to a Ray cluster there ({exc})") from None


def _keep_stdout_for_the_report() -> None:
    """Ray's driver prints the cluster's error messages ("(raylet) A worker died or was killed
    ...") to stdout from a thread of its own, whatever log_to_driver says (ray/_private/worker.py:
    listen_error_messages -> print_to_stdstream, is_err False): in the middle of a JSON or JUnit
    report on stdout (measured when a worker was killed). They go to stderr, one escaped line
    each; the cell itself is reported by this driver ("queued again")."""
    import click

    from ..core.textsafe import terminal_safe

    try:
        from ray._private import worker
    except ImportError:
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        for line in data.get("lines", []):
            click.echo(f"mtplint: ray {data.get('pid', '')}: {terminal_safe(str(line))}", err=True)

    if hasattr(worker, "print_to_stdstream"):
        worker.print_to_stdstream = to_stderr


def _reachable(address: str) -> None:
    """A HOST:PORT (or ray://HOST:PORT) that answers nothing is bad input at once: ray.init
    retries such an address for minutes (measured: still waiting after 300 s)."""
    import socket

    if address == "auto":
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise BadInput(f"--cluster {address}: not a Ray address (auto, HOST:PORT or ray://HOST:PORT)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise BadInput(f"--cluster {address}: no Ray cluster answers there ({exc.strerror or exc})") from None


def _remote_path(t: Target) -> str:
    """What a node lints: a hub checkpoint at the commit read here (a branch moving mid-matrix
    cannot mix two commits), a local one as given (nodes share the storage and enter the same
    working directory)."""
    origin = getattr(t.inventory, "origin", None)
    return str(origin or t.path)


def _secrets(hub: bool) -> dict[str, str]:
    """The environment an actor's cells need and the node may not have: the cache secret (every
    cell seals and verifies its cache entries with it, so nodes sharing a store agree), and a hub
    token for the actors whose cells read the hub. They travel as the actor's creation argument,
    not in Ray's runtime environment: Ray 2.60's runtime-env agent writes a runtime
    environment's env_vars, values included, to each node's runtime_env_agent.log at INFO
    ("Creating runtime env: {...}"; tests/matrix/test_matrix_cluster.py greps every file Ray wrote)."""
    env = {}
    if os.environ.get(CACHE_SECRET):
        env[CACHE_SECRET] = os.environ[CACHE_SECRET]
    if hub:
        token = os.environ.get(HUB_TOKEN)
        if not token:
            try:
                from huggingface_hub import get_token

                token = get_token()
            except ImportError:
                token = None
        if token:
            env[HUB_TOKEN] = token
        if os.environ.get("HF_ENDPOINT"):
            env["HF_ENDPOINT"] = os.environ["HF_ENDPOINT"]
    return env


@dataclass
class _Node:
    id: str
    address: str
    slots: int
    busy: int = 0
    releases: set[str] = field(default_factory=set)


class _Run:
    def __init__(
        self,
        ray: Any,
        targets: list[Target],
        units: list[Unit],
        paths: list[str],
        progress: Callable[[str], None] | None,
        jobs: int | None,
    ) -> None:
        self.ray, self.targets, self.units, self.paths = ray, targets, units, paths
        self.progress, self.jobs = progress, jobs
        self.pending: deque[int] = deque(round_robin(units))
        self.tries = [0] * len(units)
        self.died_on: list[set[str]] = [set() for _ in units]
        self.cells: dict[int, Cell] = {}
        self.errors: dict[int, dict[str, Any]] = {}
        self.actors: dict[tuple[str, str, bool], Any] = {}
        self.inflight: dict[Any, tuple[int, tuple[str, str, bool]]] = {}
        self.nodes: dict[str, _Node] = {}
        self.cwd = os.getcwd()

    def run(self) -> list[Cell]:
        try:
            self._refresh_nodes()
            while self.pending or self.inflight:
                if not self.errors:
                    self._dispatch()
                elif not self.inflight:
                    break
                if not self.inflight:
                    raise ProbeFailure("no live Ray node with a CPU can take the matrix's cells")
                ready, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=1.0)
                for ref in ready:
                    self._collect(ref)
        finally:
            self._kill_actors()
        if self.errors:
            first = self.errors[min(self.errors)]
            kind = BadInput if first["exit_code"] == BadInput.exit_code else ProbeFailure
            raise kind(first["message"], path=first["path"])
        return [self.cells[i] for i in range(len(self.units))]

    def _refresh_nodes(self) -> None:
        cap = self.jobs or MAX_PER_NODE
        alive = {}
        for n in self.ray.nodes():
            cpus = int(n.get("Resources", {}).get("CPU", 0))
            if n.get("Alive") and cpus >= 1:
                old = self.nodes.get(n["NodeID"])
                alive[n["NodeID"]] = old or _Node(n["NodeID"], n.get("NodeManagerAddress", "?"), min(cpus, cap))
        self.nodes = alive

    def _key(self, i: int, node: str) -> tuple[str, str, bool]:
        u = self.units[i]
        return (node, str(u.combo.get("vllm")), self.paths[u.target].startswith("hf://"))

    def _dispatch(self) -> None:
        for node in self.nodes.values():
            while node.busy < node.slots and self.pending:
                i = self._pick(node)
                if i is None:
                    break
                self.pending.remove(i)
                key = self._key(i, node.id)
                u = self.units[i]
                ref = self._actor(key).lint_cell.remote(self.paths[u.target], u.settings, u.combo)
                self.inflight[ref] = (i, key)
                node.busy += 1

    def _pick(self, node: _Node) -> int | None:
        """The next cell for this node: one of a vLLM it already runs, else the next in line;
        never one whose worker died here while another node is alive."""
        fits = [i for i in self.pending if not self._avoid(i, node.id)]
        own = [i for i in fits if str(self.units[i].combo.get("vllm")) in node.releases]
        return next(iter(own or fits), None)

    def _avoid(self, i: int, node: str) -> bool:
        return node in self.died_on[i] and any(n not in self.died_on[i] for n in self.nodes)

    def _actor(self, key: tuple[str, str, bool]) -> Any:
        if key not in self.actors:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            from .cluster_worker import CellRunner

            node = self.nodes[key[0]]
            node.releases.add(key[1])
            options: dict[str, Any] = {
                "num_cpus": 0,  # this driver counts each node's slots itself
                "max_concurrency": node.slots,
                "max_restarts": 0,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=key[0], soft=False),
            }
            runner = self.ray.remote(CellRunner).options(**options)
            self.actors[key] = runner.remote(self.cwd, _secrets(hub=key[2]))
        return self.actors[key]

    def _collect(self, ref: Any) -> None:
        i, key = self.inflight.pop(ref)
        node = self.nodes.get(key[0])
        if node is not None:
            node.busy -= 1
        try:
            out = self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as exc:
            raise ProbeFailure(f"cell {self._name(i)}: {type(exc.cause).__name__}: {exc.cause}") from None
        except self.ray.exceptions.RayError as exc:
            self._died(i, key, exc)
            return
        if "error" in out:
            self.errors[i] = out["error"]
            self._say(f"{self._name(i)}: {out['error']['type']}")
            return
        assert i not in self.cells, f"cell {i} reported twice"
        self.cells[i] = out["cell"]
        codes = " ".join(sorted({f.code for f in out["cell"].findings if f.severity == "error"})) or "no errors"
        where = f"node {node.address if node else '?'} {key[0][:8]}"
        self._say(f"[{len(self.cells)}/{len(self.units)}] {self._name(i)}: {codes} ({where}, {out['seconds']:.1f} s)")

    def _died(self, i: int, key: tuple[str, str, bool], exc: BaseException) -> None:
        """The cell's actor (or its node) is gone: its cells go back in line, for another node."""
        self.tries[i] += 1
        self.died_on[i].add(key[0])
        actor = self.actors.pop(key, None)
        if actor is not None:
            self._kill(actor)
            node = self.nodes.get(key[0])
            if node is not None:
                node.releases.discard(key[1])
        if self.tries[i] >= MAX_TRIES:
            raise ProbeFailure(f"cell {self._name(i)}: its Ray worker died {MAX_TRIES} times ({type(exc).__name__})")
        self.pending.appendleft(i)
        self._refresh_nodes()
        self._say(f"{self._name(i)}: its Ray worker died ({type(exc).__name__}); queued again")

    def _kill_actors(self) -> None:
        for actor in self.actors.values():
            self._kill(actor)
        self.actors.clear()

    def _kill(self, actor: Any) -> None:
        with contextlib.suppress(Exception):  # already gone: nothing left to stop
            self.ray.kill(actor, no_restart=True)

    def _name(self, i: int) -> str:
        u = self.units[i]
        return f"{self.targets[u.target].path} {label(u.combo)}"

    def _say(self, msg: str) -> None:
        if self.progress:
            self.progress(msg)
