"""Library code reports through logging and tqdm; only the console scripts print."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCES = sorted(Path(__file__).parents[1].glob("packages/*/src/*/**/*.py"))
# The console scripts and their error handler, `xtts-bench hlo`'s runner (a script copied
# to a machine without xtts, run as `python runner.py DIR`) and `xtts-bench runtime`'s
# worker process (`python -m xtts_bench._speaker`), whose stdout lines are its answer.
CONSOLE = {"cli.py", "cli_runner.py", "runner.py", "_speaker.py"}


@pytest.mark.parametrize("path", [p for p in SOURCES if p.name not in CONSOLE], ids=str)
def test_library_code_does_not_print(path):
    calls = [node.lineno for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id == "print"]  # fmt: skip
    assert not calls, f"{path}: print() at lines {calls}"


def test_the_sources_were_found():
    assert len(SOURCES) > 40
