"""The `mtplint` command group: every command registered with a plain import, and the exit code
of a command line (0 nothing at or above --fail-on, 1 findings, 2 bad input or usage, 3 internal or
probe failure, 130 interrupted).
"""

from __future__ import annotations

import os
import sys

import click

from ..core.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK
from ..core.versions import __version__
from ..matrix.command import matrix_cmd
from ..twin.command import twin_cmd
from ..verify.command import verify_cmd
from .check import check_cmd
from .env import env_cmd
from .fix import fix_cmd
from .precommit import precommit_cmd
from .rules import rule_cmd, rules_cmd


class DefaultGroup(click.Group):
    """`mtplint PATH ...` means `mtplint check PATH ...`, like `ruff PATH`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version", "-V"):
            args = [self._named(args) or "check", *args]
        return super().parse_args(ctx, args)

    def _named(self, args: list[str]) -> str | None:
        """The command a line names after its options (`mtplint --gpu b200 check -- vllm serve ...`),
        taken out of ARGS; a word before `--` that is a command and no file on disk."""
        if not args[0].startswith("-"):
            return None
        words = args[: args.index("--")] if "--" in args else args
        for i, word in enumerate(words):
            if word in self.commands and not os.path.exists(word):
                del args[i]
                return word
        return None


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="mtplint")
def main() -> None:
    """Will this checkpoint load and draft correctly with MTP on this vLLM?"""


for command in (check_cmd, rule_cmd, rules_cmd, fix_cmd, env_cmd, matrix_cmd, precommit_cmd, twin_cmd, verify_cmd):
    main.add_command(command)


def cli_entry(argv: list[str] | None = None) -> int:
    try:
        main.main(args=argv, prog_name="mtplint", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:  # click's default would be 2 for these, 1 for others
        exc.show()
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT
    except click.Abort:  # click's name for Ctrl-C (or EOF) before a command body's own guard runs
        click.echo("mtplint: interrupted", err=True)
        return EXIT_INTERRUPTED
    except SystemExit as exc:
        return int(exc.code or 0)
    return EXIT_OK


def run() -> None:
    sys.exit(cli_entry())
