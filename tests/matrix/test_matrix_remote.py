"""`mtplint matrix hf://ORG/NAME[@REVISION]` against a local hub (tests/support/hub_server.py): headers
only, as `mtplint check` reads it; the revision resolved once for every cell; cells naming
hf://ORG/NAME@COMMIT with check's own findings; a second run served from the probe cache; the
errors check gives, word for word. Only the pinned vLLM is probed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hub_server import HubServer, run_cli, shard_requests
from mtplint.config.schema import Settings
from mtplint.core.probe_summary import ProbedVllm
from mtplint.core.run_inputs import RunInputs
from mtplint.matrix.cells import run_matrix

from fixtures.build import cached_build, manifest

TOKEN = "hf_MATRIXtoken5e1d7c3b9a"
# GLM-4.5-Air re-exported without its MTP layer: one root cause on a config.json key, with an
# artifact fix, 46 shards. Probes in ~10 s.
RECIPE = "glm45-air-mtp-dropped"


@pytest.fixture(scope="module")
def hub():
    with HubServer(token=TOKEN) as server:
        server.add("org/ckpt", cached_build(RECIPE))
        server.add("org/gated", cached_build(RECIPE), gated=True)
        yield server


def _cells(proc) -> list[dict]:
    assert proc.returncode == 1, proc.stderr[-3000:]
    return json.loads(proc.stdout)["cells"]


@pytest.mark.probe
def test_matrix_reads_headers_once_names_the_commit_and_is_cached_the_second_time(hub, tmp_path):
    home, cache = tmp_path / "home", str(tmp_path / "cache")
    commit = hub.repos["org/ckpt"].commit
    args = ["matrix", "hf://org/ckpt@main", "--vllm-commit", "0.33.0", "-n", "1,2", "--format", "json", "-q"]
    hub.reset()
    cells = _cells(run_cli(hub, home, *args, MTPLINT_CACHE_DIR=cache))

    stats = hub.stats()
    assert stats["by_kind"].get("info") == 1, "every cell lints the one revision resolved first"
    per_shard = shard_requests(stats)
    assert sorted(per_shard) == sorted(p.name for p in cached_build(RECIPE).glob("*.safetensors"))
    assert all(len(hits) <= 2 and all(h.range for h in hits) for hits in per_shard.values()), per_shard
    assert stats["bytes"] < manifest(cached_build(RECIPE))["logical_bytes"] / 100, stats["bytes"]

    assert [(c["vllm"]["version"], c["inputs"]["num_speculative_tokens"]) for c in cells] == [
        ("0.33.0", 1),
        ("0.33.0", 2),
    ]
    assert all(c["inputs"]["path"] == f"hf://org/ckpt@{commit}" for c in cells)
    assert not any(c["probe"]["cached"] for c in cells)

    # The n=1 cell is `mtplint check` of the same inputs: its findings, from the probe cache.
    check = run_cli(hub, home, "hf://org/ckpt@main", "--format", "json", "-q", MTPLINT_CACHE_DIR=cache)
    assert check.returncode == 1, check.stderr
    single = json.loads(check.stdout)
    assert single["probe"]["cached"] and single["inputs"]["path"] == cells[0]["inputs"]["path"]
    assert cells[0]["findings"] == single["findings"]
    assert any(f["code"] == "MTP006" and f["location"]["config_key"] for f in single["findings"])

    hub.reset()
    again = _cells(run_cli(hub, home, *args, MTPLINT_CACHE_DIR=cache))
    assert all(c["probe"]["cached"] for c in again)
    assert [c["findings"] for c in again] == [c["findings"] for c in cells], _first_difference(again, cells)
    kinds = hub.stats()["by_kind"]
    kinds.pop("other", None)
    assert kinds == {"info": 1}, "the inventory is remembered by commit: no header is read again"


def _first_difference(again: list[dict], first: list[dict]) -> str:
    """Where a cached cell's findings first differ from the fresh cell's, field by field: a
    list-level diff truncates the long messages these findings carry."""
    for n, (a, b) in enumerate(zip(again, first, strict=True)):
        if len(a["findings"]) != len(b["findings"]):
            return f"cell {n}: {len(a['findings'])} findings cached, {len(b['findings'])} fresh"
        for i, (x, y) in enumerate(zip(a["findings"], b["findings"], strict=True)):
            for key in sorted(set(x) | set(y)):
                if x.get(key) != y.get(key):
                    return (
                        f"cell {n} finding {i} ({x.get('code')}) {key}:\n cached {x.get(key)!r}\n fresh  {y.get(key)!r}"
                    )
    return "no difference in findings"


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("hf://org/missing", "repository org/missing not found"),
        ("hf://org/gated@main", "org/gated is a gated repository"),
        ("hf://org/ckpt@v9", "revision 'v9' not found in org/ckpt"),
    ],
)
@pytest.mark.slow
def test_matrix_errors_are_check_s_one_line(hub, tmp_path, path, needle):
    """Before any probe: exit 2 and the very line `mtplint check` prints."""
    home = tmp_path / "home"
    matrix = run_cli(hub, home, "matrix", path, "-n", "1,2", "--format", "json")
    check = run_cli(hub, home, path)
    assert (matrix.returncode, check.returncode) == (2, 2), matrix.stderr + check.stderr
    assert matrix.stdout == "" and matrix.stderr == check.stderr
    (line,) = matrix.stderr.splitlines()
    assert line.startswith("mtplint: error: ") and needle in line


def test_every_cell_lints_the_inventory_the_first_cell_read():
    """A hub branch is resolved once per matrix: the later cells are handed the first cell's
    inventory (its commit), never read the repository again."""
    seen = []

    def lint(path: Path, s: dict, inventory: object, progress: object) -> SimpleNamespace:
        seen.append(inventory)
        read = inventory or object()
        result = SimpleNamespace(vllm=ProbedVllm("0.33.0"), inputs=RunInputs(path="ckpt"), findings=[], probe=None)
        return SimpleNamespace(inventory=read, path_inventory=None, result=lambda: result)

    axes = {"vllm": ["0.33.0"], "n": [1, 2, 3], "gpu": [None], "tp": [1]}
    cells = run_matrix(Path("hf://org/x@main"), Settings(), axes, lint)
    assert len(cells) == 3 and seen[0] is None
    assert seen[1] is seen[2] and seen[1] is not None
