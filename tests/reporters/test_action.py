"""The GitHub Action (action.yml), its example workflow (docs/examples/mtplint.yml) and the GitLab
job in docs/ci.md (issue 15).

The documents are validated against SchemaStore's GitHub Action metadata and workflow schemas
and GitLab's CI schema, as vendored by the check-jsonschema package (tests/data/schemas/).
The action's own scripts are run as the runner runs them (`bash --noprofile --norc -eo
pipefail`): the cache-key step on copies of the files it hashes, the lint step with hostile
`args` against a stand-in CLI that records its argv, and (marked `probe`) twice against the
real mtplint, the second run finding the probe report in the cache the first one filled, on a
checkpoint directory and on a gated `hf://` repository of a local hub (tests/support/hub_server.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from paths import ROOT

SCHEMAS = ROOT / "tests" / "data" / "schemas"
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class GitHubYaml(yaml.SafeLoader):
    """YAML as GitHub reads it: `on:` is a key, not the boolean YAML 1.1 makes of it."""


GitHubYaml.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
GitHubYaml.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=GitHubYaml)


def validator(name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((SCHEMAS / name).read_text()))


ACTION = load(ROOT / "action.yml")
STEPS = ACTION["runs"]["steps"]
BY_ID = {s["id"]: s for s in STEPS if "id" in s}
EXAMPLE = load(ROOT / "docs" / "examples" / "mtplint.yml")


def gitlab_job() -> dict:
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "ci.md").read_text(), re.S)
    (job,) = [yaml.load(b, Loader=GitHubYaml) for b in blocks if b.startswith("mtplint:")]
    return job


# -- the published schemas -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "doc", "broken"),
    [
        ("github-action.json", lambda: ACTION, lambda d: d["runs"].update(using="docker-compose")),
        ("github-workflow.json", lambda: EXAMPLE, lambda d: d["jobs"]["mtplint"].update({"runs_on": "x"})),
        ("gitlab-ci.json", gitlab_job, lambda d: d["mtplint"]["artifacts"]["reports"].update(junit=3)),
    ],
    ids=["action", "example-workflow", "gitlab-job"],
)
def test_documents_validate_against_the_published_schemas(schema, doc, broken):
    check = validator(schema)
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in check.iter_errors(doc())]
    assert not errors, errors
    wrong = json.loads(json.dumps(doc()))
    broken(wrong)
    assert not check.is_valid(wrong)  # the schema is strict enough to catch a slip


# -- structure the schema cannot see ---------------------------------------------------------


def test_no_expression_is_pasted_into_a_script():
    for step in STEPS:
        assert "${{" not in step.get("run", ""), f"step {step.get('id') or step.get('name')}: use env:"


def test_every_input_is_used_and_no_unknown_one_is_referenced():
    declared = set(ACTION["inputs"])
    text = json.dumps(ACTION["runs"]) + json.dumps(ACTION["outputs"])
    used = set(re.findall(r"inputs\.([A-Za-z0-9_-]+)", text))
    assert used == declared, (declared - used, used - declared)


def test_every_output_is_written_by_its_step():
    for name, output in ACTION["outputs"].items():
        (expr,) = EXPRESSION.findall(output["value"])
        step_id, key = re.search(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr).groups()
        step = BY_ID[step_id]
        if "run" in step:
            assert re.search(rf"(echo \"|print\(f\"|^){re.escape(key)}=", step["run"], re.M), (name, key)
        else:
            assert step["uses"].startswith("actions/cache/restore@") and key == "cache-hit", name


def test_inputs_reach_the_scripts_through_env():
    lint = BY_ID["lint"]
    for name in (
        "path",
        "args",
        "gpu",
        "fail-on",
        "sarif",
        "json",
        "vllm-version",
        "kv-cache-dtype",
        "serve-args-file",
        "hf-token",
    ):
        assert f"${{{{ inputs.{name} }}}}" in lint["env"].values(), name
    # The hub token reaches the lint step alone.
    assert [s.get("id") for s in STEPS if "inputs.hf-token" in json.dumps(s)] == ["lint"]


def test_caches_are_restored_and_saved_under_the_same_keys_and_paths():
    env_restore = BY_ID["env-cache"]
    (env_save,) = [
        s for s in STEPS if s.get("uses", "").startswith("actions/cache/save@") and "env" in s["with"]["key"]
    ]
    assert env_restore["uses"].startswith("actions/cache/restore@")
    assert env_restore["with"]["key"] == env_save["with"]["key"] == "${{ steps.keys.outputs.env }}"
    assert env_restore["with"]["path"] == env_save["with"]["path"]
    assert "${{ github.action_path }}/.venv" in env_restore["with"]["path"]
    probe_restore = BY_ID["probe-cache"]
    assert probe_restore["with"]["restore-keys"] == "${{ steps.keys.outputs.probe }}"
    # The directory the probe cache is restored to is the one the lint step's mtplint uses.
    assert probe_restore["with"]["path"] == "${{ steps.keys.outputs.dir }}/probe"
    assert BY_ID["lint"]["env"]["MTPLINT_CACHE_DIR"] == BY_ID["install"]["env"]["MTPLINT_CACHE_DIR"]
    assert BY_ID["lint"]["env"]["MTPLINT_CACHE_DIR"] == "${{ steps.keys.outputs.dir }}"
    # The environment is saved before the lint, so a run with findings still caches it.
    assert STEPS.index(env_save) < STEPS.index(BY_ID["lint"])


def _uploads(steps: list[dict]) -> list[dict]:
    return [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]


def test_example_uploads_sarif_even_when_the_lint_fails():
    steps = EXAMPLE["jobs"]["mtplint"]["steps"]
    (action,) = [s for s in steps if s.get("uses", "").startswith("mtplint/mtplint@")]
    (upload,) = _uploads(steps)
    assert "always()" in upload["if"]
    assert upload["with"]["sarif_file"] == action["with"]["sarif"]
    assert set(action["with"]) <= set(ACTION["inputs"])


def test_readme_example_uploads_sarif_even_when_the_lint_fails():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## GitHub Action", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    steps = yaml.load(block, Loader=GitHubYaml)
    (upload,) = _uploads(steps)
    assert "always()" in upload["if"]
    (action,) = [s for s in steps if s.get("uses", "").startswith("mtplint/mtplint@")]
    assert set(action["with"]) <= set(ACTION["inputs"])


def test_gitlab_job_keeps_the_junit_report_when_the_lint_fails():
    job = gitlab_job()["mtplint"]
    assert job["artifacts"]["when"] == "always"
    report = job["artifacts"]["reports"]["junit"]
    (command,) = job["script"]
    words = command.split()
    formats = [words[i + 1] for i, w in enumerate(words) if w == "--format"]
    outputs = [words[i + 1] for i, w in enumerate(words) if w == "--output"]
    assert dict(zip(formats, outputs, strict=True))["junit"] == report


# -- the scripts, run as the runner runs them ------------------------------------------------


def run_step(step_id: str, env: dict[str, str], tmp: Path) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """One `shell: bash` step: its env (inputs substituted as the runner would), GITHUB_OUTPUT."""
    script = tmp / f"{step_id}.sh"
    script.write_text(BY_ID[step_id]["run"])
    out = tmp / f"{step_id}.out"
    out.write_text("")
    full = {"PATH": os.environ["PATH"], "HOME": str(tmp), "GITHUB_OUTPUT": str(out), **env}
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        env=full,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
    )
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    return proc, outputs


def _action_copy(tmp: Path) -> Path:
    copy = tmp / "action"
    (copy / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", copy / "scripts")
    shutil.copy(ROOT / "pyproject.toml", copy)
    shutil.copytree(ROOT / "requirements", copy / "requirements")
    return copy


def test_cache_keys_follow_the_vllm_version_the_requirements_and_the_runner(tmp_path):
    action = _action_copy(tmp_path)
    runner = {"GITHUB_ACTION_PATH": str(action), "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", "RUNNER_TEMP": "/rt"}

    def keys(**env: str) -> dict[str, str]:
        proc, outputs = run_step("keys", {**runner, "PYTHON_VERSION": "3.11.9", "VLLM_VERSION": "", **env}, tmp_path)
        assert proc.returncode == 0, proc.stderr
        return outputs

    pinned = re.search(r"vllm==([0-9][0-9a-z.+]*)", (ROOT / "scripts" / "setup.sh").read_text()).group(1)
    base = keys()
    assert base["dir"] == "/rt/mtplint-cache"
    assert f"-vllm{pinned}-" in base["env"] and f"-vllm{pinned}-" in base["probe"]
    assert base["env"].startswith("mtplint-") and "-Linux-X64-" in base["env"] and "-py3.11.9-" in base["env"]
    assert keys() == base  # stable
    other = keys(VLLM_VERSION="0.29.0")
    assert "-vllm0.29.0-" in other["env"] and other["env"] != base["env"] and other["probe"] != base["probe"]
    assert keys(PYTHON_VERSION="3.11.10")["env"] != base["env"]
    assert keys(VLLM_VERSION="0.29.0 $(x)/..")["env"].count("/") == 0  # a key is one word, whatever the input
    with (action / "requirements" / "vllm-probe.txt").open("a") as fh:
        fh.write("\nsome-new-dependency==1.0\n")
    changed = keys()
    assert changed["env"] != base["env"] and changed["probe"] == base["probe"]


FAKE_MTPLINT = """#!{python}
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
Path(os.environ["ARGV_LOG"]).write_text(json.dumps(args))
seen = {{k: os.environ.get(k) for k in ("HF_TOKEN", "HF_TOKEN_INPUT")}}
Path(os.environ["ARGV_LOG"]).with_suffix(".env.json").write_text(json.dumps(seen))
outs = [args[i + 1] for i, a in enumerate(args) if a == "--output"]
report = {{"findings": [{{}}] * 3, "summary": {{"error": 2, "warning": 1, "info": 0}}, "suppressed": [{{}}],
           "probe": {{"cached": True}}}}
Path(outs[2]).write_text(json.dumps(report))
Path(outs[1]).write_text("{{}}")
sys.exit(int(os.environ.get("FAKE_RC", "1")))
"""


@pytest.fixture
def fake_action(tmp_path) -> Path:
    """An action directory whose mtplint records its argv: the step's own argument handling is
    what is tested here (the real CLI runs in test_lint_step_with_the_real_mtplint)."""
    action = tmp_path / "action"
    (action / ".venv" / "bin").mkdir(parents=True)
    cli = action / ".venv" / "bin" / "mtplint"
    cli.write_text(FAKE_MTPLINT.format(python=sys.executable))
    cli.chmod(0o755)
    (action / ".venv" / "bin" / "python").symlink_to(sys.executable)
    return action


def _lint_env(action: Path, tmp: Path, **inputs: str) -> dict[str, str]:
    env = {
        "GITHUB_ACTION_PATH": str(action),
        "ARGV_LOG": str(tmp / "argv.json"),
        "CHECKPOINT": "models/ckpt",
        "NUM_SPECULATIVE_TOKENS": "2",
        "GPU": "b200",
        "TENSOR_PARALLEL_SIZE": "8",
        "VLLM_VERSION": "",
        "KV_CACHE_DTYPE": "",
        "SERVE_ARGS_FILE": "",
        "FAIL_ON": "error",
        "ARGS": "",
        "SARIF": "out.sarif",
        "JSON": "out.json",
        "MTPLINT_CACHE_DIR": str(tmp / "cache"),
    }
    return {**env, **inputs}


def test_lint_step_passes_args_as_words_and_expands_nothing(fake_action, tmp_path):
    hostile = "--select MTP001,MTP002\n  --baseline 'b c.json' $(touch pwned) `touch pwned2`; touch pwned3 * $HOME"
    proc, outputs = run_step("lint", _lint_env(fake_action, tmp_path, ARGS=hostile, CHECKPOINT="--help"), tmp_path)
    assert proc.returncode == 0, proc.stderr  # the step records the exit code; the last step fails with it
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[:9] == ["check", "--num-speculative-tokens", "2", "--gpu", "b200", "--tp", "8", "--fail-on", "error"]
    extra = ["--select", "MTP001,MTP002", "--baseline", "'b", "c.json'", "$(touch", "pwned)", "`touch", "pwned2`;"]
    extra += ["touch", "pwned3", "*", "$HOME"]
    assert argv[9 : 9 + len(extra)] == extra
    assert argv[-2:] == ["--", "--help"]  # a path is never read as an option
    assert not list(tmp_path.glob("pwned*"))
    assert outputs == {
        "exit-code": "1",
        "sarif": "out.sarif",
        "json": "out.json",
        "findings": "3",
        "errors": "2",
        "warnings": "1",
        "infos": "0",
        "suppressed": "1",
        "probe-cached": "true",
    }


def test_lint_step_without_args_and_with_a_vllm_version(fake_action, tmp_path):
    env = _lint_env(fake_action, tmp_path, VLLM_VERSION="0.29.0", KV_CACHE_DTYPE="fp8", FAKE_RC="0")
    proc, outputs = run_step("lint", env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[9:13] == ["--vllm-commit", "0.29.0", "--kv-cache-dtype", "fp8"]
    assert argv[13] == "--format"  # no empty word where args would be
    assert outputs["exit-code"] == "0"


@pytest.mark.parametrize(
    ("given", "workflow", "expected"),
    [
        ("", None, None),  # no token: none at all, not an empty one
        ("hf_INPUTtoken0123456789", None, "hf_INPUTtoken0123456789"),
        ("", "hf_WORKFLOWtoken012345", "hf_WORKFLOWtoken012345"),  # the job's own HF_TOKEN stands
        ("hf_INPUTtoken0123456789", "hf_WORKFLOWtoken012345", "hf_INPUTtoken0123456789"),
    ],
    ids=["none", "input", "workflow-env", "input-over-env"],
)
def test_lint_step_takes_a_hub_repository_and_its_token(fake_action, tmp_path, given, workflow, expected):
    env = _lint_env(fake_action, tmp_path, CHECKPOINT="hf://org/name@refs/pr/1", HF_TOKEN_INPUT=given)
    if workflow is not None:
        env["HF_TOKEN"] = workflow
    proc, outputs = run_step("lint", env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[-2:] == ["--", "hf://org/name@refs/pr/1"]  # as given: no directory check, no normalisation
    assert json.loads((tmp_path / "argv.env.json").read_text()) == {"HF_TOKEN": expected, "HF_TOKEN_INPUT": None}
    printed = proc.stdout + proc.stderr + json.dumps(outputs)
    assert "hf_INPUT" not in printed and "hf_WORKFLOW" not in printed


def test_lint_step_leaves_no_stale_report(fake_action, tmp_path):
    (tmp_path / "out.json").write_text('{"summary": {"error": 99}}')
    (fake_action / ".venv" / "bin" / "mtplint").write_text("#!/bin/sh\nexit 2\n")
    proc, outputs = run_step("lint", _lint_env(fake_action, tmp_path), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert outputs == {"exit-code": "2", "sarif": "out.sarif", "json": "out.json"}


@pytest.mark.probe
def test_lint_step_with_the_real_mtplint_fills_then_reads_the_probe_cache(tmp_path):
    """The real step with the real mtplint: the first run probes (vLLM in a child process), the
    second finds the report in MTPLINT_CACHE_DIR, the directory the action caches."""
    from recorded_cli import case_checkpoint

    checkpoint = case_checkpoint("dsv4-w4a16-bf16-mtp")
    env = _lint_env(ROOT, tmp_path, CHECKPOINT=str(checkpoint), NUM_SPECULATIVE_TOKENS="1", GPU="h100")
    env["TENSOR_PARALLEL_SIZE"] = "1"
    first, outputs = run_step("lint", env, tmp_path)
    assert first.returncode == 0, first.stderr
    assert outputs["exit-code"] == "1" and outputs["errors"] == "11" and outputs["probe-cached"] == "false", outputs
    assert "::error " in first.stdout
    sarif = json.loads((tmp_path / "out.sarif").read_text())
    assert sarif["runs"][0]["results"]
    assert list((tmp_path / "cache" / "probe").iterdir())
    second, outputs = run_step("lint", env, tmp_path)
    assert outputs["exit-code"] == "1" and outputs["probe-cached"] == "true", (outputs, second.stderr)


@pytest.mark.probe
def test_lint_step_with_the_real_mtplint_on_a_gated_hub_repository(tmp_path):
    """`path: hf://ORG/NAME@REV` through the real step against the local hub: without the token
    the one-line error, exit 2; with the `hf-token` input, headers only, the report naming the
    commit, paths relative to the hub repository's root (its files are in no checkout), a fix
    command that writes into --out; the second run from the probe cache, one hub request."""
    from hub_server import HubServer, shard_requests

    from fixtures.build import cached_build

    token = "hf_ACTIONtoken9b8c7d6e5f"
    with HubServer(token=token) as hub:
        commit = hub.add("org/ckpt", cached_build("glm45-air-mtp-dropped"), gated=True)
        env = _lint_env(ROOT, tmp_path, CHECKPOINT="hf://org/ckpt@main", NUM_SPECULATIVE_TOKENS="1", GPU="h100")
        env.update(TENSOR_PARALLEL_SIZE="1", HF_TOKEN_INPUT="")
        env.update({k: v for k, v in hub.env(tmp_path / "hf").items() if k.startswith("HF_") or k == "NO_PROXY"})
        if "MTPLINT_WORKER_DIR" in os.environ:  # the session's workers, stopped when it ends
            env["MTPLINT_WORKER_DIR"] = os.environ["MTPLINT_WORKER_DIR"]

        refused, outputs = run_step("lint", env, tmp_path)
        assert outputs == {"exit-code": "2", "sarif": "out.sarif", "json": "out.json"}, refused.stderr
        (line,) = refused.stderr.splitlines()
        assert "org/ckpt is a gated repository" in line and "HF_TOKEN" in line

        hub.reset()
        first, outputs = run_step("lint", {**env, "HF_TOKEN_INPUT": token}, tmp_path)
        stats = hub.stats()
        assert outputs["exit-code"] == "1" and outputs["probe-cached"] == "false", (outputs, first.stderr)
        # MTP006 and 12 MTP005 (the shared expert's alias path under mlp.experts is not a parameter of its own).
        assert outputs["errors"] == "13", outputs
        assert all(len(hits) <= 2 and all(h.range for h in hits) for hits in shard_requests(stats).values())
        report = json.loads((tmp_path / "out.json").read_text())
        assert report["inputs"]["path"] == f"hf://org/ckpt@{commit}"
        sarif = (tmp_path / "out.sarif").read_text()
        uris = {
            loc["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(sarif)["runs"][0]["results"]
            for loc in r["locations"]
        }
        assert uris == {"config.json"}
        annotations = [a for a in first.stdout.splitlines() if a.startswith("::error ")]
        assert annotations and all(a.startswith("::error file=config.json,") for a in annotations)
        fix = f"fix: mtplint fix hf://org/ckpt@{commit} --only set-mtp-depth --out DIR"
        assert any(a.endswith(fix) for a in annotations), annotations[0]
        printed = first.stdout + first.stderr + sarif + json.dumps(report) + json.dumps(outputs)
        assert token not in printed

        hub.reset()
        second, outputs = run_step("lint", {**env, "HF_TOKEN_INPUT": token}, tmp_path)
        assert outputs["exit-code"] == "1" and outputs["probe-cached"] == "true", (outputs, second.stderr)
        kinds = hub.stats()["by_kind"]
        kinds.pop("other", None)
        assert kinds == {"info": 1}


def test_lint_step_with_a_serve_args_file(fake_action, tmp_path):
    # The deployment's own command decides TP, N and the KV cache dtype: the shorthand inputs
    # are not passed beside it (a differing --tp would be a contradiction, exit 2).
    env = _lint_env(fake_action, tmp_path, SERVE_ARGS_FILE="deploy/serve.sh", KV_CACHE_DTYPE="fp8", FAKE_RC="0")
    proc, _outputs = run_step("lint", env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[:7] == ["check", "--serve-args-file", "deploy/serve.sh", "--gpu", "b200", "--fail-on", "error"]
    assert not {"--tp", "--num-speculative-tokens", "--kv-cache-dtype"} & set(argv)
