"""`python -m mtplint.cli_main`: the console script, runnable without the installed wrapper."""

from .cli import run

if __name__ == "__main__":
    run()
