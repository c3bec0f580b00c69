"""Every `tf.function` of the packages is traced without AutoGraph.

Their traced code uses TensorFlow's control flow (`tf.while_loop`, `tf.cond`) explicitly,
so AutoGraph's conversion of each Python function it reaches (parsing and rewriting its
source) is time and nothing else: about half the trace of the train step. Without it, a
Python `if`/`while` on a tensor inside traced code fails at its trace, where a test sees it.
The benchmarks' dynamic-shape baseline keeps TensorFlow's default, as a user writes it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGES = Path(__file__).resolve().parents[1] / "packages"
SOURCES = sorted(
    path
    for name in ("xtts-audio", "xtts-data", "xtts-train", "xtts-serve")
    for path in (PACKAGES / name / "src").rglob("*.py")
)


def _tf_function_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "function" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "tf"):  # fmt: skip
            yield node


def test_every_tf_function_turns_autograph_off():
    calls = [
        (path, call) for path in SOURCES for call in _tf_function_calls(ast.parse(path.read_text()))
    ]
    assert len(calls) > 20  # the scan sees the decoding, slots, steps, export ...
    missing = [
        f"{path.relative_to(PACKAGES)}:{call.lineno}"
        for path, call in calls
        if not any(
            k.arg == "autograph" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in call.keywords
        )
    ]
    assert not missing, f"tf.function without autograph=False: {missing}"
