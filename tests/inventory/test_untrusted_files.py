"""Issue #37, items 3-5: files mtplint did not create are read as regular files within a cap
(core.regular_files), cache entries and directories cannot hang or flood a lint, and a serve
command nested past any real one is bad input.

Each scenario that used to hang or read without bound runs in a child with a timeout and an
address-space cap, so a regression fails here instead of stalling or exhausting the machine.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mtplint.config import serve_args
from mtplint.core import regular_files
from mtplint.core.errors import BadInput

MTPLINT = [sys.executable, "-m", "mtplint"]
_AS_CAP = 2 << 30  # a child reading /dev/zero without bound dies of MemoryError, not the machine


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_AS_CAP, _AS_CAP))


def run(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60):
    """The command's result; a hang is a failure (TimeoutExpired), not a stuck suite."""
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, preexec_fn=_capped)


def run_py(code: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return run([sys.executable, "-c", textwrap.dedent(code)], env=env, timeout=timeout)


def assert_one_line_exit_2(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    return root


# -- item 3: --serve-args-file and other files from outside ------------------------------------


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "directory"])
def test_a_serve_args_file_that_is_no_regular_file_is_one_line_exit_2(tmp_path, ckpt, kind):
    if kind == "fifo":
        path = tmp_path / "serve.fifo"
        os.mkfifo(path)
    elif kind == "directory":
        path = tmp_path / "serve.d"
        path.mkdir()
    else:
        path = Path(kind)
    proc = run([*MTPLINT, str(ckpt), "--serve-args-file", str(path)])
    assert_one_line_exit_2(proc, str(path), "not a regular file")


@pytest.mark.parametrize("text", ["", "\n\n", "# vllm serve org/model --tensor-parallel-size 8\n"])
def test_a_serve_args_file_without_a_command_is_one_line_exit_2(tmp_path, ckpt, text):
    path = tmp_path / "serve.sh"
    path.write_text(text)
    proc = run([*MTPLINT, str(ckpt), "--serve-args-file", str(path)])
    assert_one_line_exit_2(proc, str(path), "holds no vllm serve command")


def test_a_fifo_given_as_the_baseline_is_bad_input_not_a_hang(tmp_path):
    fifo = tmp_path / "baseline.json"
    os.mkfifo(fifo)
    proc = run_py(
        f"""
        from pathlib import Path
        from mtplint.core.errors import BadInput
        from mtplint.pipeline.baseline import read_baseline
        try:
            read_baseline(Path({str(fifo)!r}))
        except BadInput as exc:
            print(exc.one_line())
        """,
        env=dict(os.environ),
    )
    assert proc.returncode == 0 and "a FIFO" in proc.stdout, proc.stdout + proc.stderr


def test_the_safe_read_refuses_links_only_where_asked(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("x")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    assert regular_files.read_capped(link, 10) == b"x"  # a hub snapshot's files are links
    with pytest.raises(regular_files.UnreadableFile, match="symbolic link"):
        regular_files.read_capped(link, 10, nofollow=True)
    with pytest.raises(regular_files.UnreadableFile, match="larger than 0 bytes"):
        regular_files.read_capped(target, 0)


# -- item 4: cache entries and directories -----------------------------------------------------------


def _cache_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MTPLINT_CACHE_SECRET"}
    return {**env, "MTPLINT_CACHE_DIR": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config"), **extra}


_PLANT = """
    import os
    from pathlib import Path
    from mtplint.core.cache_dirs import read_entry, write_entry
    entry = Path(os.environ["MTPLINT_CACHE_DIR"]) / "probe" / "k.json.gz"
    write_entry(entry, b"good")
    assert read_entry(entry) == b"good"
    entry.unlink()
    {plant}
    print(read_entry(entry), os.path.lexists(entry))
"""


@pytest.mark.parametrize(
    "plant",
    ["os.mkfifo(entry)", "entry.symlink_to('/dev/zero')"],
    ids=["fifo", "link-to-dev-zero"],
)
def test_what_is_planted_at_a_cache_entry_is_never_read_and_is_removed(tmp_path, plant):
    proc = run_py(_PLANT.format(plant=plant), _cache_env(tmp_path), timeout=30)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["None", "False"]


_TWO_ENTRIES = """
    import os
    from pathlib import Path
    from mtplint.core.cache_dirs import read_entry, write_entry
    root = Path(os.environ["MTPLINT_CACHE_DIR"])
    for name in ("a", "b"):
        write_entry(root / "probe" / name, b"body")
    print(read_entry(root / "probe" / "a"), read_entry(root / "probe" / "b"))
"""


def test_a_cache_directory_others_can_write_is_made_private_and_said_once(tmp_path):
    cache = tmp_path / "cache"
    (cache / "probe").mkdir(parents=True)
    os.chmod(cache, 0o777)
    os.chmod(cache / "probe", 0o777)
    proc = run_py(_TWO_ENTRIES, _cache_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["b'body'", "b'body'"]
    for d in (cache, cache / "probe"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    warnings = proc.stderr.strip().splitlines()
    assert len(warnings) == 2, proc.stderr  # one line per directory, not one per entry
    assert all("writable by other users (mode 0777); made it private" in w for w in warnings)


def test_a_cache_directory_of_someone_else_that_others_can_write_is_not_used(tmp_path):
    """As MTPLINT_CACHE_DIR=/tmp would be: world-writable and another user's."""
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    try:
        os.chown(cache, 65534, 65534)  # nobody's
    except PermissionError:
        pytest.skip("only root can give a directory to another user")
    proc = run_py(_TWO_ENTRIES, _cache_env(tmp_path))
    assert proc.stdout.split() == ["None", "None"], proc.stderr
    assert proc.stderr.count("nothing is cached there") == 1, proc.stderr
    assert stat.S_IMODE(cache.stat().st_mode) == 0o777 and not any(cache.iterdir())


_SECRET_READS = """
    import os
    from pathlib import Path
    from mtplint.core.cache_dirs import read_entry, write_entry
    root = Path(os.environ["MTPLINT_CACHE_DIR"])
    for _ in range(3):
        write_entry(root / "probe" / "a", b"body")
        print(read_entry(root / "probe" / "a"))
"""


def test_a_secret_refused_for_its_permissions_is_said_once(tmp_path):
    secret = tmp_path / "config" / "mtplint" / "cache-secret"
    secret.parent.mkdir(parents=True)
    secret.write_text("0" * 64)
    os.chmod(secret, 0o644)
    proc = run_py(_SECRET_READS, _cache_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None"] * 3  # refused: caching is off
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cache secret" in lines[0] and "mode 0644" in lines[0], proc.stderr


def test_a_fifo_planted_as_the_secret_does_not_hang(tmp_path):
    secret = tmp_path / "config" / "mtplint" / "cache-secret"
    secret.parent.mkdir(parents=True)
    os.mkfifo(secret)
    proc = run_py(_SECRET_READS, _cache_env(tmp_path), timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None"] * 3
    assert proc.stderr.count("cache secret") == 1, proc.stderr


# -- item 5: nesting depth of a serve command ----------------------------------------------------------


def test_a_5000_deep_speculative_config_is_one_line_exit_2(ckpt):
    deep = '{"method": "mtp", "x": ' + "[" * 5000 + "]" * 5000 + "}"
    proc = run([*MTPLINT, "check", "--", "vllm", "serve", str(ckpt), "--speculative-config", deep])
    assert_one_line_exit_2(proc, "--speculative-config", "nested more than 64 levels")


@pytest.mark.parametrize("flag", ["--hf-overrides", "--speculative-config", "--compilation-config"])
def test_any_flag_nested_past_the_limit_is_bad_input_before_the_probe(tmp_path, flag):
    deep = "{" + '"a": {' * 100 + "}" * 101
    path = tmp_path / "serve.sh"
    path.write_text(f"vllm serve org/model {flag}='{deep}'\n")
    with pytest.raises(BadInput, match=f"{flag} is nested more than 64 levels deep"):
        serve_args.folded({"serve_args_file": str(path)}, {}, tmp_path)


def test_brackets_inside_json_strings_do_not_count_as_nesting(tmp_path):
    value = json.dumps({"method": "mtp", "note": "[" * 500})
    assert serve_args.nesting_problem(["--speculative-config", value], "cmd") is None


def test_an_inline_chat_template_is_not_taken_for_nested_json():
    template = "{% for m in messages %}" + "{{ '[' }}" * 100 + "{% endfor %}"
    assert serve_args.nesting_problem(["--chat-template", template], "cmd") is None
    assert serve_args.nesting_problem([f"--chat-template={template}"], "cmd") is None
