"""The command line: every command, its output and its exit code."""

from .app import main, run

__all__ = ["main", "run"]
