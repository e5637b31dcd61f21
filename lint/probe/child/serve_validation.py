"""The checks `vllm serve` runs on its arguments before it builds anything, replayed with the
probed release's own functions: the serve subcommand's `validate_parsed_serve_args` (an
`--enable-auto-tool-choice` without `--tool-call-parser`, a chat template that does not exist,
flags that need each other) and the API server's `validate_api_server_args` (the tool call
parser's name among those the release registers). `vllm serve` refuses such a command at
start-up; so does the lint (exit 2, vLLM's own words).

Two inputs are not the checkpoint's and may not be on the machine that lints: a chat template
file (a path on the GPU box, often from vLLM's source tree) and a parser plugin (Python the probe
does not run). Where the template is not readable here, or a plugin is named, that part is left
out and recorded as a step not checked.
"""

from __future__ import annotations

import os
from typing import Any

from . import release_lookup, unchecked_steps

# Where each release keeps the functions (0.33: entrypoints/common; earlier: entrypoints/openai).
_VALIDATORS = (
    (("vllm.entrypoints.common.cli_args", "vllm.entrypoints.openai.cli_args"), "validate_parsed_serve_args"),
    (
        ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.openai.api_server"),
        "validate_api_server_args",
    ),
)
_JINJA_CHARS = "{}\n"


class Refused(Exception):
    """`vllm serve` refuses the command before start-up: vLLM's message."""


def validate(args: Any) -> None:
    """Run the probed release's own pre-start-up checks on the parsed `vllm serve` Namespace;
    Refused with vLLM's message where one raises."""
    _leave_out_unreadable_chat_template(args)
    plugins = _parser_plugins(args)
    for modules, name in _VALIDATORS:
        if plugins and name == "validate_api_server_args":
            continue  # its parser names may be the plugin's: recorded as not checked
        check = release_lookup.first(modules, name)
        if check is None:
            continue  # a release without this check: vLLM runs none either
        try:
            check(args)
        except (TypeError, ValueError, KeyError) as exc:
            said = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise Refused(" ".join(str(said).split())) from None
        except ImportError as exc:
            unchecked_steps.record(
                f"`vllm serve`'s own argument check ({name})",
                "",
                f"it imports {exc.name or exc}, which the probe's environment lacks",
                exc.name or "",
            )


def _leave_out_unreadable_chat_template(args: Any) -> None:
    template = getattr(args, "chat_template", None)
    if not isinstance(template, str) or any(c in template for c in _JINJA_CHARS) or os.path.exists(template):
        return  # none, an inline template, or a file vLLM reads here as it would there
    try:
        from vllm.transformers_utils.chat_templates.registry import CHAT_TEMPLATES_DIR

        if (CHAT_TEMPLATES_DIR / template).exists():
            return  # one of the release's built-in templates
    except Exception:
        pass
    args.chat_template = None
    unchecked_steps.record(
        f"whether the chat template file {template!r} exists",
        "--chat-template",
        "the file is not on the machine that lints (a path on the serving machine is read there)",
    )


def _parser_plugins(args: Any) -> bool:
    """Whether the command names a parser plugin (recorded as a step not checked): the names
    it registers are unknown here, so the API server's name check is left out with it."""
    named = False
    for flag, attr in (
        ("--tool-parser-plugin", "tool_parser_plugin"),
        ("--reasoning-parser-plugin", "reasoning_parser_plugin"),
    ):
        plugin = getattr(args, attr, None)
        if plugin:
            named = True
            unchecked_steps.record(
                f"the parser names the plugin {plugin!r} registers (vLLM's API server checks them at start-up)",
                flag,
                "a parser plugin is Python code of the deployment, which the probe does not run",
            )
    return named
