"""Each provisioned release with its own pins (lint/envs/pins.py): its wheel's Requires-Dist
resolved by uv without torch and the GPU-only packages, what differs from the interpreter
installed into its site/, and the versions named by `mtplint env list` and the report."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.core.errors import ProbeFailure
from mtplint.core.findings import RunResult
from mtplint.core.probe_summary import ProbedVllm
from mtplint.core.run_inputs import RunInputs
from mtplint.envs import pins, provision, store

MTPLINT = [sys.executable, "-m", "mtplint"]

# Lines of vLLM 0.19.0's own METADATA (its wheel), and two whose markers exclude them.
METADATA_0_19_0 = """\
Metadata-Version: 2.4
Name: vllm
Version: 0.19.0
Requires-Dist: regex
Requires-Dist: transformers<5,>=4.56.0
Requires-Dist: compressed-tensors==0.14.0.1
Requires-Dist: gguf>=0.17.0
Requires-Dist: numba==0.61.2
Requires-Dist: torch==2.10.0
Requires-Dist: torchaudio==2.10.0
Requires-Dist: flashinfer-python==0.6.6
Requires-Dist: nvidia-cutlass-dsl>=4.4.0.dev1
Requires-Dist: quack-kernels>=0.2.7
Requires-Dist: legacy-only>=1; python_version < "3"
Requires-Dist: pandas; extra == "bench"

vLLM is a fast and easy-to-use library for LLM inference and serving.
"""


def _dist_info(tmp_path: Path, text: str = METADATA_0_19_0) -> Path:
    dist = tmp_path / "vllm-0.19.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(text)
    return dist


def test_requirements_are_the_wheels_own_without_torch_and_gpu_only_packages(tmp_path):
    kept, dropped = pins.requirements(_dist_info(tmp_path))
    assert kept == ["regex", "transformers<5,>=4.56.0", "compressed-tensors==0.14.0.1", "gguf>=0.17.0"]
    assert dropped == ["flashinfer-python", "numba", "nvidia-cutlass-dsl", "quack-kernels", "torch", "torchaudio"]


def test_only_pins_the_interpreter_lacks_at_that_version_are_installed():
    shared = {"transformers": "5.20.2", "compressed-tensors": "0.17.0", "regex": "2026.1.1"}
    resolved = {"compressed-tensors": "0.14.0.1", "gguf": "0.19.0", "regex": "2026.1.1", "transformers": "4.57.6"}
    assert pins.differing(resolved, shared) == ["compressed-tensors==0.14.0.1", "gguf==0.19.0", "transformers==4.57.6"]


# uv pip compile's annotated output (its own format, abridged from vLLM 0.19.0's resolution).
UV_OUTPUT = """\
compressed-tensors==0.14.0.1
    # via -r requirements.in
fastapi==0.135.3
    # via -r requirements.in
huggingface-hub==0.36.2
    # via
    #   tokenizers
    #   transformers
loguru==0.7.3
    # via compressed-tensors
pydantic==2.12.5
    # via
    #   compressed-tensors
    #   fastapi
tokenizers==0.22.2
    # via transformers
transformers==4.57.6
    # via
    #   -r requirements.in
    #   compressed-tensors
nvidia-cutlass-dsl==4.4.0
    # via -r requirements.in
"""


def test_what_transformers_and_compressed_tensors_require_is_held_as_shipped():
    found = pins._parse(UV_OUTPUT)
    assert found.pins["transformers"] == "4.57.6" and "nvidia-cutlass-dsl" not in found.pins
    assert found.closure(pins.NAMED) == {
        "compressed-tensors",
        "huggingface-hub",
        "loguru",
        "pydantic",
        "tokenizers",
        "transformers",
    }  # fastapi: the API server's, not on a path the probe runs


def test_a_resolution_that_fails_is_one_line_naming_the_release(monkeypatch, tmp_path):
    """Real uv, offline over an empty cache: nothing can resolve."""
    uv = provision.uv_binary()
    if uv is None:
        pytest.skip("no uv beside mtplint")
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    with pytest.raises(ProbeFailure) as caught:
        pins.resolve(uv, provision.base_python(), ["compressed-tensors==0.14.0.1"], [], "vLLM 0.19.0")
    said = str(caught.value)
    assert said.startswith("vLLM 0.19.0: uv could not resolve its requirements (") and "\n" not in said, said
    assert "compressed-tensors" in said


def _env(root: Path, name: str, record: dict) -> Path:
    env = root / name
    (env / "site").mkdir(parents=True)
    provision.write_wrapper(env, f"vLLM {name}")
    (env / "env.json").write_text(json.dumps({"base_python": sys.executable, **record}))
    return env


def _cli(*args: str, envs: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MTPLINT_ENVS_DIR=str(envs))
    return subprocess.run([*MTPLINT, *args], capture_output=True, text=True, env=env, timeout=120)


def test_a_release_provisioned_before_its_own_pins_is_made_again(tmp_path, monkeypatch):
    """It probed on the interpreter's transformers and compressed-tensors: never reused."""
    monkeypatch.setenv("MTPLINT_ENVS_DIR", str(tmp_path / "envs"))
    _env(tmp_path / "envs", "0.19.0", {"kind": "release", "version": "0.19.0"})
    _env(tmp_path / "envs", "0.20.2", {"kind": "release", "version": "0.20.2", "pins": {"transformers": "4.57.6"}})
    assert store.find("0.19.0") is None and store.read(tmp_path / "envs" / "0.19.0").unpinned
    assert store.find("0.20.2") is not None
    listed = _cli("env", "list", envs=tmp_path / "envs")
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("0.19.0"))
    assert "made before per-release pins: made again on next use" in line, listed.stdout


def test_env_list_names_each_environments_transformers_and_compressed_tensors(tmp_path):
    envs = tmp_path / "envs"
    env = _env(
        envs,
        "0.19.0",
        {"kind": "release", "version": "0.19.0", "pins": {"transformers": "4.57.6", "compressed-tensors": "0.14.0.1"}},
    )
    (env / "site" / "transformers-4.57.6.dist-info").mkdir()
    (env / "site" / "compressed_tensors-0.14.0.1.dist-info").mkdir()
    listed = _cli("env", "list", envs=envs)
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("0.19.0"))
    assert line.endswith("transformers 4.57.6, compressed-tensors 0.14.0.1"), line
    default = next(ln for ln in listed.stdout.splitlines() if ln.startswith("default"))
    here = (
        f"transformers {importlib.metadata.version('transformers')}, compressed-tensors "
        + importlib.metadata.version("compressed-tensors")
    )
    assert default.endswith(here), default
    torch = next(ln for ln in listed.stdout.splitlines() if ln.startswith("torch"))
    assert importlib.metadata.version("torch") in torch and "shared CPU build" in torch, torch


def _result(libraries: dict[str, str]) -> RunResult:
    vllm = ProbedVllm("0.19.0", "g2a69949bd", libraries)
    return RunResult(findings=[], rules_evaluated=[], vllm=vllm, inputs=RunInputs(path="ckpt"))


def test_the_report_names_the_probed_libraries_and_the_shared_torch():
    from mtplint.reporters.json_report import build_report, load_schema
    from mtplint.reporters.text import render_text

    libraries = {"transformers": "4.57.6", "compressed-tensors": "0.14.0.1", "torch": "2.13.0+cpu"}
    report = build_report(_result(libraries))
    assert report["vllm"] == {
        "version": "0.19.0",
        "commit": "g2a69949bd",
        "libraries": libraries,
        "shared": ["torch"],
    }
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(report, load_schema())
    text = render_text(_result(libraries), full=True)
    assert (
        "vLLM 0.19.0 probed with transformers 4.57.6, compressed-tensors 0.14.0.1; "
        "torch 2.13.0+cpu (the shared CPU build, not the release's pin)"
    ) in text


@pytest.mark.probe
def test_0_19_0_is_provisioned_with_its_own_pins_and_still_gives_its_verdicts():
    """vLLM 0.19.0 requires transformers>=4.56,<5 and compressed-tensors==0.14.0.1 (0.33.0:
    5.x and 0.17.0). Provisioned into the test store (build/envs, shared with the rule cases),
    it imports its own; torch is the interpreter's. Official layouts keep their verdicts."""
    from packaging.version import Version

    from fixtures.build import cached_build

    env = provision.release("0.19.0", "2a69949bd")
    record = env.record
    assert record["pins_as_of"] == "2026-04-03"  # the day PyPI first held vllm 0.19.0
    assert {"transformers", "compressed-tensors", "huggingface-hub", "tokenizers"} <= set(record["pins_as_shipped"])
    assert Version(record["pins"]["transformers"]) < Version("5"), record["pins"]
    assert record["pins"]["compressed-tensors"].startswith("0.14."), record["pins"]
    assert "torch" not in record["pins"] and "torch" in record["gpu_only_dropped"]
    assert record["torch"] == importlib.metadata.version("torch")
    seen = subprocess.run(
        [
            str(env.python),
            "-c",
            "import json, transformers, compressed_tensors, torch;"
            "print(json.dumps([transformers.__version__, transformers.__file__, compressed_tensors.__version__,"
            " torch.__file__]))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    t_version, t_file, ct_version, torch_file = json.loads(seen.strip().splitlines()[-1])
    assert t_version == record["pins"]["transformers"] and t_file.startswith(str(env.path / "site"))
    assert ct_version == record["pins"]["compressed-tensors"]
    assert not torch_file.startswith(str(env.path))  # the shared CPU build
    for recipe in ("dsv3-fp8-official", "glm45-air-bf16-official"):
        proc = subprocess.run(
            [*MTPLINT, str(cached_build(recipe)), "--vllm-commit", "0.19.0", "--format", "json", "-q"],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert proc.returncode == 0, f"{recipe}: exit {proc.returncode}: {proc.stderr[-3000:]}"
        report = json.loads(proc.stdout)
        assert report["vllm"]["version"] == "0.19.0"
        assert report["vllm"]["libraries"]["transformers"] == record["pins"]["transformers"]
        assert report["vllm"]["libraries"]["compressed-tensors"] == record["pins"]["compressed-tensors"]
        assert report["vllm"]["shared"] == ["torch"]
        assert [f["message"] for f in report["findings"] if f["severity"] == "error"] == []


def test_a_source_trees_requirements_are_its_cuda_requirements_and_their_includes(tmp_path):
    """--vllm-source / fetched commits: requirements/cuda.txt as a CUDA wheel is built from it."""
    req = tmp_path / "requirements"
    req.mkdir()
    (req / "common.txt").write_text(
        "# Common dependencies for all platforms\n"
        "regex # Replace re for higher-performance regex matching\n"
        "transformers >= 4.56.0, < 5\n"
        "compressed-tensors == 0.14.0.1 # required for compressed-tensors\n"
        "gguf >= 0.17.0; python_version < '3'\n"
        "--extra-index-url https://example.invalid/simple\n"
    )
    (req / "cuda.txt").write_text(
        "# Common dependencies\n-r common.txt\n\nnumba == 0.61.2\ntorch==2.10.0\nflashinfer-python==0.6.6\n"
        "-r ../outside.txt\n"
    )
    (tmp_path / "outside.txt").write_text("not-from-the-tree==1.0\n")
    kept, dropped = pins.tree_requirements(req)
    assert kept == ["regex", "transformers >= 4.56.0, < 5", "compressed-tensors == 0.14.0.1"]
    assert dropped == ["flashinfer-python", "numba", "torch"]
    assert pins.tree_requirements(tmp_path / "absent") is None


@pytest.mark.probe
def test_a_commits_own_requirements_are_resolved_as_of_its_day(tmp_path):
    """A commit of a vLLM checkout whose requirements/ asks for 0.19.0's libraries, committed
    the day before 0.19.0 was published: its environment gets them (package index, real uv)."""
    from mtplint.envs import source

    repo = tmp_path / "vllm"
    (repo / "requirements").mkdir(parents=True)
    (repo / "requirements" / "common.txt").write_text("transformers >= 4.56.0, < 5\ncompressed-tensors == 0.14.0.1\n")
    (repo / "requirements" / "cuda.txt").write_text("-r common.txt\ntorch == 2.10.0\n")
    when = {"GIT_COMMITTER_DATE": "2026-04-02T12:00:00Z", "GIT_AUTHOR_DATE": "2026-04-02T12:00:00Z"}
    git = {**os.environ, **when, "GIT_CONFIG_GLOBAL": os.devnull}
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "r"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=git)
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    env_dir = tmp_path / "env"
    (env_dir / "site").mkdir(parents=True)
    own = source.tree_pins(repo, repo, sha, env_dir, provision.installer(), None)
    assert own["pins_as_of"] == "2026-04-03" and own["pins_from"] == "requirements/ of the commit"
    assert own["pins"]["transformers"] == "4.57.6" and own["pins"]["compressed-tensors"] == "0.14.0.1"
    assert "torch" not in own["pins"] and own["gpu_only_dropped"] == ["torch"]
    assert (env_dir / "site" / "transformers-4.57.6.dist-info").is_dir()
    assert not (env_dir / "site" / "requirements").exists()  # beside site/, never on the path
