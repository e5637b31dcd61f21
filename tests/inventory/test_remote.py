"""`mtplint hf://ORG/NAME[@REVISION]` against a local hub (tests/support/hub_server.py): the same inventory and
findings as the local copy, headers only (<= 2 range requests per shard), one request on a re-lint
of the same commit, one-line errors, and the token nowhere in the output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hub_server import HubServer, point_client_at, shard_requests
from hub_server import run_cli as cli
from mtplint.core.errors import BadInput
from mtplint.inventory import remote
from mtplint.inventory.checkpoint import load_inventory

from fixtures.build import cached_build, manifest
from fixtures.sparse import write_sharded

TOKEN = "hf_MARKERtoken7f3a9c1e5b"  # the server's token; must appear in no output
RECIPE = "dsv4-flash-w4a16-bf16mtp"  # the full DeepSeek-V4-Flash layout: 46 shards, 166 GB logical


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    small = tmp_path_factory.mktemp("small") / "ckpt"
    write_sharded(small, [(f"model.layers.{i}.mlp.weight", "BF16", (64, 64)) for i in range(4)], 2)
    (small / "config.json").write_text(json.dumps({"model_type": "llama"}, indent=1))  # the key on line 2
    bad = tmp_path_factory.mktemp("bad") / "ckpt"
    write_sharded(bad, [(f"w{i}", "BF16", (8, 8)) for i in range(4)], 2)
    (bad / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with open(bad / "model-00002-of-00002.safetensors", "r+b") as f:
        f.seek(8)
        f.write(b"[")  # the header's JSON no longer parses
    with HubServer(token=TOKEN) as server:
        server.add("org/dsv4", cached_build(RECIPE))
        server.add("org/small", small)
        server.add("org/private", small, private=True)
        server.add("org/gated", small, gated=True)
        server.add("org/bad", bad)
        server.add("org/sidecar", cached_build("glm45-air-nvfp4-mtp-sidecar"))
        server.add("org/glm47", cached_build("glm47-bf16-official"))  # ships its tokenizer
        yield server


@pytest.fixture
def client(hub, tmp_path, monkeypatch):
    """huggingface_hub in this process pointed at the local hub, with a cache and no token of its own."""
    point_client_at(hub, monkeypatch, tmp_path)
    hub.reset()
    return hub


@pytest.fixture(autouse=True)
def no_internet(monkeypatch):
    """Any name but the loopback fails to resolve in this process: no test here can reach the internet."""
    import socket

    real = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise socket.gaierror(socket.EAI_NONAME, f"test: {host} is not the local hub")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)


@pytest.mark.slow
def test_hub_inventory_is_the_local_one_from_headers_only(client):
    local = load_inventory(cached_build(RECIPE))
    inv = load_inventory("hf://org/dsv4")
    commit = client.repos["org/dsv4"].commit
    assert inv.origin == f"hf://org/dsv4@{commit}"
    assert inv.tensors == local.tensors
    assert (inv.shards, inv.digest, inv.modules) == (local.shards, local.digest, local.modules)
    assert inv.config == local.config and inv.hf_quant_config == local.hf_quant_config
    assert inv.index_path is not None and inv.index_path.read_bytes() == local.index_path.read_bytes()

    stats = client.stats()
    per_shard = shard_requests(stats)
    assert sorted(per_shard) == sorted(local.shards)
    assert all(len(hits) <= 2 and all(h.range for h in hits) for hits in per_shard.values())
    assert all(h.range for hits in per_shard.values() for h in hits), "a shard was fetched without Range"
    logical = manifest(cached_build(RECIPE))["logical_bytes"]
    assert stats["bytes"] < logical / 100, stats["bytes"]
    assert stats["by_kind"]["info"] == 1, [
        (h.method, h.path) for h in stats["log"] if not h.path.endswith(".safetensors")
    ]


def test_a_second_lint_of_the_same_commit_makes_one_request(client):
    first = load_inventory("hf://org/small")
    client.reset()
    again = load_inventory("hf://org/small")
    assert again.tensors == first.tensors
    kinds = client.stats()["by_kind"]
    kinds.pop("other", None)
    assert kinds == {"info": 1}


def test_revisions_by_branch_and_by_commit(client):
    commit = client.repos["org/small"].commit
    assert load_inventory("hf://org/small@main").origin == f"hf://org/small@{commit}"
    assert load_inventory(f"hf://org/small@{commit}").origin == f"hf://org/small@{commit}"
    # click.Path folds the scheme's double slash; the folded spelling names the same repository.
    assert load_inventory(Path("hf://org/small")).origin == f"hf://org/small@{commit}"


def test_private_repo_needs_the_token(client, monkeypatch):
    with pytest.raises(BadInput) as e:
        load_inventory("hf://org/private")
    line = e.value.one_line()
    assert "org/private not found" in line and "HF_TOKEN" in line and "login" in line
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert len(load_inventory("hf://org/private").tensors) == 4


@pytest.mark.parametrize(
    ("path", "needles"),
    [
        ("hf://org/missing", ["repository org/missing not found"]),
        ("hf://org/small@v9", ["revision 'v9' not found in org/small"]),
        ("hf://org/gated", ["org/gated is a gated repository", "HF_TOKEN"]),
        ("hf://org/bad", ["hf://org/bad@", "/model-00002-of-00002.safetensors: bad header"]),
        ("hf://org/../x", ["not a hub repository"]),
    ],
)
def test_errors_are_one_line(client, path, needles):
    with pytest.raises(BadInput) as e:
        load_inventory(path)
    line = e.value.one_line()
    assert "\n" not in line
    for n in needles:
        assert n in line


def test_unreachable_hub(client, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(BadInput, match=r"cannot reach http://127\.0\.0\.1:9"):
        load_inventory("hf://org/small")


def test_a_server_ignoring_ranges_still_sends_no_whole_shard(client, monkeypatch, tmp_path):
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path))  # every header read now, none from the memo
    monkeypatch.setattr(client, "ignore_ranges", True)
    try:
        inv = load_inventory("hf://org/dsv4@main")
    finally:
        client.ignore_ranges = False
    assert len(inv.tensors) == manifest(cached_build(RECIPE))["tensors"]
    # The client hangs up after its range; what the server pushed into the socket meanwhile is bounded.
    assert client.stats()["bytes"] < manifest(cached_build(RECIPE))["logical_bytes"] / 100


def test_report_lines_of_a_hub_revision_come_from_its_downloaded_files(client):
    from mtplint.core.findings import Finding, Location
    from mtplint.reporters.lines import SourceLines

    load_inventory("hf://org/small")
    commit = client.repos["org/small"].commit
    client.reset()
    key = Finding("MTP009", "n", "error", "m", Location("config.json", config_key="model_type"), key="model_type")
    assert SourceLines(f"hf://org/small@{commit}").locate(key) == ("config.json", 2)
    # Only what the lint downloaded: a revision never fetched has no lines, and no request is made.
    assert SourceLines("hf://org/private@main").locate(key) == ("config.json", None)
    from huggingface_hub import constants

    # A JSON file beside the snapshots: what `../../x.json` from the snapshot would read.
    (Path(constants.HF_HUB_CACHE) / "models--org--small" / "x.json").write_text('{"a": 1}')
    outside = Finding("MTP015", "n", "error", "m", Location("../../x.json", config_key="a"), key="a")
    assert SourceLines(f"hf://org/small@{commit}").locate(outside) == ("../../x.json", None)
    assert client.stats()["requests"] == 0


def test_hub_spec():
    assert remote.hub_spec("hf://org/name@refs/pr/1") == remote.HubSpec("org/name", "refs/pr/1")
    assert remote.hub_spec("hf://gpt2") == remote.HubSpec("gpt2", None)
    assert remote.hub_spec("/some/dir") is None
    with pytest.raises(BadInput):
        remote.hub_spec("hf://org/name@")


# --- the CLI, in a child process pointed at the hub by its environment ----------------------


@pytest.mark.parametrize(
    ("repo", "needle"),
    [("org/missing", "repository org/missing not found"), ("org/private", "HF_TOKEN")],
)
def test_cli_bad_repo_exits_2_with_one_line(hub, tmp_path, repo, needle):
    proc = cli(hub, tmp_path / "home", f"hf://{repo}")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_cli_never_prints_a_rejected_token(hub, tmp_path):
    wrong = "hf_WRONGmarker0123456789"
    proc = cli(hub, tmp_path / "home", "hf://org/private", "--debug", token=wrong)
    assert proc.returncode == 2
    assert "token in use cannot read it" in proc.stderr
    assert wrong not in proc.stdout + proc.stderr


@pytest.mark.probe
def test_cli_same_findings_as_local_and_no_token_anywhere(hub, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    local = cli(hub, tmp_path / "home", str(cached_build(RECIPE)), "--format", "json", "-q")
    assert local.returncode == 1, local.stderr
    args = ["--format", "json", "--output", str(out / "r.json"), "--format", "sarif", "--output", str(out / "r.sarif")]
    remote_run = cli(hub, tmp_path / "home", "hf://org/dsv4", *args, "--debug", token=TOKEN)
    assert remote_run.returncode == 1, remote_run.stderr
    here, there = json.loads(local.stdout), json.loads((out / "r.json").read_text())
    assert [(f["id"], f["severity"], f["message"], f["location"]) for f in there["findings"]] == [
        (f["id"], f["severity"], f["message"], f["location"]) for f in here["findings"]
    ]
    commit = hub.repos["org/dsv4"].commit
    assert there["inputs"]["path"] == f"hf://org/dsv4@{commit}"
    sarif = (out / "r.sarif").read_text()
    uris = {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for r in json.loads(sarif)["runs"][0]["results"]
        for loc in r["locations"]
    }
    assert uris and not any(u.startswith("hf:") for u in uris), uris  # relative to the repository, not a folded path
    everything = remote_run.stdout + remote_run.stderr + sarif + (out / "r.json").read_text()
    assert TOKEN not in everything
    # The serve command a finding carries names the repository and the commit, not a local path.
    serves = [f["fixes"]["serve"] for f in there["findings"] if f["fixes"]["serve"]]
    assert all(f"org/dsv4 --revision {commit}" in s for s in serves)


@pytest.mark.probe
def test_the_tokenizer_a_hub_checkpoint_ships_is_read_for_the_reasoning_parser(hub, tmp_path):
    """vLLM builds --reasoning-parser over the model's tokenizer while it creates the engine
    config: the hub checkpoint's tokenizer files are fetched with its other small files, so the
    parser is built as for the local copy (before: MTP025, 'ships no tokenizer files')."""
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 1})
    serve = ["vllm", "serve", "org/glm47", "--speculative-config", spec, "--reasoning-parser", "glm45"]
    proc = cli(hub, tmp_path / "home", "check", "--format", "json", "-q", "--", *serve)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["findings"] == []


@pytest.mark.slow
def test_hub_listing_finds_the_sidecar_shard(client):
    inv = load_inventory("hf://org/sidecar")
    assert len(inv.unindexed["mtp.safetensors"]) == 404
    assert inv.other_indexes == ["mtp.safetensors.index.json"]


def test_cli_fix_of_a_hub_repo_needs_out(hub, tmp_path):
    proc = cli(hub, tmp_path / "home", "fix", "hf://org/sidecar")
    assert proc.returncode == 2 and "needs --out DIR" in proc.stderr


@pytest.mark.probe
def test_cli_fix_writes_the_changed_index_into_out_and_never_the_cache(hub, tmp_path):
    out = tmp_path / "pr"
    home = tmp_path / "home"
    proc = cli(hub, home, "fix", "hf://org/sidecar", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the hub repository has not been changed" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors.index.json"]
    wm = json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]
    assert wm["model.layers.46.eh_proj.weight"] == "mtp.safetensors"
    cached = next(home.rglob("snapshots/*/model.safetensors.index.json"))
    assert "model.layers.46.eh_proj.weight" not in json.loads(cached.read_text())["weight_map"]
    assert not list(home.rglob("*.mtplint-orig"))
