"""`mtplint env list|add X|remove X|prune|workers`: the probe environments in the user cache
(lint/envs/) and the probe workers serving them (lint/probe/workers.py). Wired into the CLI by cli.py."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..core.errors import BadInput
from ..core.exit_guard import guarded

if TYPE_CHECKING:
    from ..envs import store


@click.group("env")
def env_cmd() -> None:
    """Probe environments: one vLLM release or commit each, provisioned on first use."""


@env_cmd.command("list")
def list_cmd() -> None:
    """Every environment with its size, and the pinned default."""
    from ..envs import pins, releases, source, store

    beside = source.pinned_version()
    shared = pins.installed()
    where = f"in {sys.executable}" if beside else f"(not beside mtplint: the {releases.PINNED} environment below)"
    envs = store.all_envs()
    width = max([14, *(len(e.name) + 1 for e in envs)])  # a name is what `env remove` takes: never cut
    default = f"; {libraries(shared)}" if beside else ""
    click.echo(f"{'default':<{width}} vLLM {beside or releases.PINNED} {where} (pinned){default}")
    for env in envs:
        r = env.record
        state = "" if env.complete else "  [incomplete: `mtplint env prune` removes it]"
        if env.unpinned:
            state = "  [made before per-release pins: made again on next use; `mtplint env prune` removes it]"
        used = time.strftime("%Y-%m-%d", time.localtime(env.last_used()))
        what = f"vLLM {r.get('version', '?')}"
        size = store.human(store.size(env.path))
        seen = "" if r.get("kind") == "engine" else f"  {libraries(env_libraries(env, shared))}"
        if r.get("pins_as_of"):
            seen += f" (resolved as of {r['pins_as_of']})"
        click.echo(f"{env.name:<{width}} {what:<34} {size:>9}  last used {used}  {origin(r)}{seen}{state}")
    torch = shared.get("torch")
    if torch:
        click.echo(f"{'torch':<{width}} {torch}, the shared CPU build every probe environment runs ({sys.executable})")
    git_cache = store.root() / ".vllm-git"
    if git_cache.is_dir():
        # The fetched commits' history and trees (lint/envs/fetch.py).
        click.echo(
            f"{'git cache':<{width}} {'commits fetched from vLLM git':<34} {store.human(store.size(git_cache)):>9}"
        )
    click.echo(f"store: {store.root()}")


def env_libraries(env: store.Env, shared: dict[str, str]) -> dict[str, str]:
    """The versions the environment's vLLM imports: its site's own copy, else the interpreter's."""
    from ..envs import pins

    seen = dict(shared)
    seen.update({k: v for k, v in (env.record.get("pins") or {}).items() if isinstance(v, str)})
    for name in pins.NAMED:
        for dist in (env.path / "site").glob(f"{name.replace('-', '_')}-*.dist-info"):
            seen[name] = dist.name.removesuffix(".dist-info").split("-", 1)[1]
    return seen


def libraries(versions: dict[str, str]) -> str:
    from ..envs import pins

    return ", ".join(f"{n} {versions.get(n, 'absent')}" for n in pins.NAMED)


def origin(record: dict) -> str:
    """Where an environment's vLLM came from."""
    kind, commit = record.get("kind"), str(record.get("commit") or "")
    if kind == "commit":
        return f"fetched commit {commit[:12]} from {record.get('remote', '?')}"
    if kind == "source":
        return f"local source {record.get('source', '?')} at {commit[:12]}"
    if kind == "release":
        return f"release (package index){f', commit {commit}' if commit else ''}"
    if kind == "engine":
        # A real engine for `mtplint verify` (lint/verify/engine_env.py), not a probe environment.
        what = f"{record.get('distribution', '?')} {record.get('version', '?')}"
        return f"engine for `mtplint verify`: {what} (package index)"
    return "unknown origin"


@env_cmd.command("add")
@click.argument("x")
@click.option("--vllm-source", type=click.Path(path_type=Path), help="vLLM git checkout X is a commit of.")
@click.option("--with", "extra", multiple=True, help="Extra package to install into the environment (repeatable).")
@click.option("--print-python", is_flag=True, help="Print only the environment's interpreter on stdout.")
def add_cmd(x: str, vllm_source: Path | None, extra: tuple[str, ...], print_python: bool) -> None:
    """Provision the environment of release or commit X now (a lint would on first use)."""

    def run() -> int:
        from ..envs import fetch, provision, releases, resolve, source

        say = resolve.announce(False)
        if vllm_source:
            env = source.source(vllm_source, x, say=say)
        elif releases.resolve(x) is None and fetch.parse(x) is not None:
            env = fetch.fetched(x, say)  # any commit of vLLM's git repository
        else:
            rel = releases.resolve(x)
            if rel is None:
                resolve.release_env(x)  # raises: what was tried, and the other ways to name a vLLM
                return 2
            if rel.version == source.pinned_version() and not extra:
                click.echo(sys.executable if print_python else f"vLLM {rel.version} is the pinned default")
                return 0
            env = provision.release(rel.version, rel.commit, say=say, extra=list(extra))
        click.echo(env.python if print_python else f"{env.name}: {env.python}")
        return 0

    sys.exit(guarded(run, False))


@env_cmd.command("remove")
@click.argument("x")
def remove_cmd(x: str) -> None:
    """Remove the environment of X (a release version, a release's commit, or a source commit prefix)."""

    def run() -> int:
        from ..envs import releases, store

        rel = releases.resolve(x)
        names = [rel.version] if rel else []
        names += [e.name for e in store.all_envs() if len(x) >= 7 and e.name.startswith(x.lower().removeprefix("g"))]
        found = [store.root() / n for n in dict.fromkeys(names) if (store.root() / n).is_dir()]
        if not found:
            raise BadInput(f"no environment for {x} in {store.root()} (see `mtplint env list`)")
        for path in found:
            freed = store.size(path)
            store.remove(path)
            click.echo(f"removed {path.name} ({store.human(freed)})")
        return 0

    sys.exit(guarded(run, False))


@env_cmd.command("prune")
@click.option("--unused-days", type=click.FloatRange(min=0), help="Also remove environments unused for this many days.")
def prune_cmd(unused_days: float | None) -> None:
    """Remove interrupted or broken environments (and, with --unused-days, stale ones)."""
    from ..envs import store

    now, freed = time.time(), 0
    for env in store.all_envs():
        stale = unused_days is not None and now - env.last_used() > unused_days * 86400
        if env.complete and not stale:
            continue
        freed += store.size(env.path)
        store.remove(env.path)
        click.echo(f"removed {env.name} ({'unused' if env.complete else 'incomplete'})")
    if store.root().is_dir():
        for junk in store.root().glob(".trash-*"):
            import shutil

            shutil.rmtree(junk, ignore_errors=True)
    click.echo(f"freed {store.human(freed)}")


@env_cmd.command("workers")
@click.option("--stop", is_flag=True, help="Stop them (probes in flight finish first).")
def workers_cmd(stop: bool) -> None:
    """Probe workers alive now: vLLM imported, forking a child per probe until idle."""
    from ..probe import workers
    from ..probe.memory_cap import format_size

    alive = workers.live()
    for w in alive:
        platform = w.get("platform") or {}
        age = time.time() - float(w.get("started") or time.time())
        rss = format_size(w["rss"]) if w.get("rss") else "?"
        click.echo(
            f"pid {w['pid']:<8} {platform.get('gpu_name', '?')} sm {'.'.join(map(str, platform.get('sm', [])))}  "
            f"{rss:>9}  up {age:5.0f} s, idle limit {float(w.get('idle', 0)):.0f} s, {w.get('running', 0)} running"
        )
    if stop:
        workers.stop_all()
        click.echo(f"stopped {len(alive)} worker(s)")
    else:
        click.echo(f"{len(alive)} worker(s) in {workers.root()}")
