"""An environment for a commit of a local vLLM git checkout (`--vllm-source PATH`): its
Python tree at that commit (`git archive`, cached by commit), with the commit's own
requirements (requirements/cuda.txt and what it includes) resolved as the package index held
them the day after it was committed (lint/envs/pins.py), torch and GPU-only packages aside.

A source tree lacks what vLLM's build writes (its .gitignore): `vllm/_version.py`
(setuptools-scm), `vllm/vllm_flash_attn/` (built from vllm-flash-attn) and the vendored
kernel packages CMake copies into `vllm/third_party/`, and the native extensions. The
version file and an installed-distribution record are written as a build would write them;
the Python build outputs are copied from the nearest release's wheel when it is at hand, as
`VLLM_USE_PRECOMPILED=1` does, else stubbed by the probe's shim like native extensions
(MTPLINT_STUB_MISSING, set by the environment's wrapper).
"""

from __future__ import annotations

import datetime
import io
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from ..core.errors import BadInput
from . import pins, provision, store
from .provision import Say

# Packages a CUDA wheel ships that its git tree does not (vLLM's .gitignore and CMake installs).
BUILD_OUTPUTS = (
    "vllm_flash_attn",
    "third_party/deep_gemm",
    "third_party/triton_kernels",
    "third_party/fmha_sm100",
    "third_party/tml_fa4",
)


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BadInput(f"--vllm-source {repo}: git {' '.join(args)}: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout.strip()


def commit_of(repo: Path, rev: str) -> str:
    if not (repo / ".git").exists() and not repo.joinpath("HEAD").is_file():
        raise BadInput(f"--vllm-source {repo}: not a git checkout")
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise BadInput(f"--vllm-commit {rev}: no such commit in the vLLM checkout {repo} (git fetch it first)")
    return proc.stdout.strip()


def version_at(repo: Path, sha: str) -> tuple[str, str | None]:
    """(the version a build at SHA would report, the release it descends from), as
    setuptools-scm's default scheme (guess-next-dev): at a tag its version, else the tag with
    its last number bumped (v0.11.0 -> 0.11.1, v0.12.0rc1 -> 0.12.0rc2) + .devN + g<sha>."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "describe", "--tags", "--long", "--match", "v[0-9]*", sha],
        capture_output=True,
        text=True,
    )
    m = re.match(r"^v((\d+)\.(\d+)\.(\d+)\S*?)-(\d+)-g[0-9a-f]+$", proc.stdout.strip())
    if proc.returncode != 0 or not m:
        pinned = pinned_version() or "0.0.0"
        return f"{pinned}+g{sha[:9]}", None
    tag, major, minor, patch, distance = m.groups()
    base = f"{major}.{minor}.{patch}"
    if distance == "0":
        return tag, base
    head, last = re.match(r"^(.*?)(\d+)$", tag).groups()  # type: ignore[union-attr]  # the pattern ends in a digit
    return f"{head}{int(last) + 1}.dev{distance}+g{sha[:9]}", base


def pinned_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


def release_tree(version: str | None) -> Path | None:
    """The vllm/ directory of that release when it is at hand (the pin, or a provisioned one)."""
    if version is None:
        return None
    if version == pinned_version():
        import importlib.util

        spec = importlib.util.find_spec("vllm")
        return Path(spec.origin).parent if spec and spec.origin else None
    env = store.find(version)
    return env.path / "site" / "vllm" if env else None


def fill_build_outputs(tree: Path, release: str | None) -> tuple[list[str], list[str]]:
    """The Python build outputs the tree lacks, as `VLLM_USE_PRECOMPILED=1 pip install -e .`
    fills them: copied from the nearest release's wheel when that release is at hand (the pin,
    or a provisioned one; native extensions left out, the shim stubs them). Without it they are
    stubbed, as the pinned wheel ships them. Returns (copied, stubbed) module names."""
    shipped = release_tree(release)
    pinned = release_tree(pinned_version())
    copied, stubbed = [], []
    for rel in (r for r in BUILD_OUTPUTS if not (tree / r).exists()):
        name = "vllm." + rel.replace("/", ".")
        if shipped is not None and (shipped / rel).is_dir():
            shutil.copytree(shipped / rel, tree / rel, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
            copied.append(name)
        elif shipped is None and (pinned is None or (pinned / rel).exists()):
            stubbed.append(name)
    return copied, stubbed


def extract(repo: Path, sha: str, site: Path) -> None:
    data = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha, "vllm"], capture_output=True)
    if data.returncode != 0:
        raise BadInput(f"--vllm-source {repo}: commit {sha[:12]} has no vllm/ package ({data.stderr.decode()[-200:]})")
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        tar.extractall(site, filter="data")


def extract_requirements(repo: Path, sha: str, env_dir: Path) -> Path | None:
    """The commit's requirements/ beside its site/ (never on the path); None when it has none."""
    data = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha, "requirements"], capture_output=True)
    if data.returncode != 0:
        return None  # older trees kept requirements-*.txt at the top; test trees have none
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        tar.extractall(env_dir, filter="data")
    return env_dir / "requirements"


def committed_day_after(repo: Path, sha: str) -> str | None:
    """The day after SHA was committed (UTC): what the package index held when it was current."""
    proc = subprocess.run(["git", "-C", str(repo), "show", "-s", "--format=%ct", sha], capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip().isdigit():
        return None
    when = datetime.datetime.fromtimestamp(int(proc.stdout.strip()), datetime.UTC).date()
    return (when + datetime.timedelta(days=1)).isoformat()


def tree_pins(repo: Path, tree_repo: Path, sha: str, env_dir: Path, tool: str, say: Say | None) -> dict:
    """The commit's own requirements resolved as of its day (provision.own_pins); without a
    requirements/ directory, the interpreter's set, as the record says."""
    found = extract_requirements(tree_repo, sha, env_dir)
    listed = pins.tree_requirements(found) if found else None
    if listed is None:
        return {"pins": None, "pins_from": "mtplint's interpreter (the tree has no requirements/)"}
    reqs, dropped = listed
    steps: dict[str, float] = {}
    own = provision.own_pins(
        env_dir / "site", reqs, dropped, committed_day_after(repo, sha), f"vLLM at {sha[:12]}", [], tool, say, steps
    )
    return {**own, "pins_from": "requirements/ of the commit", "steps": {k: round(v, 1) for k, v in steps.items()}}


def write_build_metadata(site: Path, version: str, sha: str) -> None:
    """What setuptools-scm and the installer would have written."""
    numeric = tuple(int(x) if x.isdigit() else x for x in re.split(r"[.+]", version))
    (site / "vllm" / "_version.py").write_text(
        "# written by mtplint for a source tree, as setuptools-scm writes it at build time\n"
        f"__version__ = version = {version!r}\n"
        f"__version_tuple__ = version_tuple = {numeric!r}\n"
        f"__commit_id__ = commit_id = {'g' + sha[:9]!r}\n"
    )
    dist = site / f"vllm-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    (dist / "INSTALLER").write_text("mtplint\n")


def source(repo: Path, rev: str, *, say: Say | None = None) -> store.Env:
    repo = repo.expanduser().resolve()
    sha = commit_of(repo, rev)
    return from_git(repo, sha, say=say, record={"kind": "source", "source": str(repo)}, origin=str(repo))


def from_git(
    repo: Path, sha: str, *, say: Say | None, record: dict, origin: str, tree_repo: Path | None = None
) -> store.Env:
    """The environment of commit SHA: REPO answers its version (git describe), TREE_REPO
    (default REPO) holds its tree; cached by commit."""
    name = sha[:12]
    with store.locked(name):
        env = store.find(name)
        if env is not None:
            return env
        started = time.perf_counter()
        version, nearest = version_at(repo, sha)
        if say:
            say(f"provisioning vLLM {version} from {origin} at {sha[:12]} (git archive; its own requirements/)")
        tmp = provision.staging(name)
        try:
            extract(tree_repo or repo, sha, tmp / "site")
            write_build_metadata(tmp / "site", version, sha)
            copied, stubs = fill_build_outputs(tmp / "site" / "vllm", nearest)
            tool = provision.installer()
            own = tree_pins(repo, tree_repo or repo, sha, tmp, tool, say)
            provision.write_wrapper(tmp, f"vLLM {version} from {origin} at {sha}", stubs)
            added = provision.add_missing_modules(tmp, tool, say, f"vLLM at {sha[:12]}")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        seconds = time.perf_counter() - started
        env = provision.finish(
            tmp,
            name,
            {
                **record,
                "version": version,
                "commit": sha,
                "nearest_release": nearest,
                "build_outputs_copied": {"from": nearest, "modules": copied} if copied else None,
                "stubbed_build_outputs": stubs,
                "base_python": provision.base_python(),
                "installer": tool,
                **own,
                "extra_modules": added,
                "created": time.time(),
                "seconds": round(seconds, 1),
            },
        )
        if say:
            say(f"vLLM {version} at {sha[:12]} ready in {seconds:.1f} s")
        return env
