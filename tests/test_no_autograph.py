"""Every `tf.function` of the packages is traced without AutoGraph.

Their traced code uses TensorFlow's control flow (`tf.while_loop`, `tf.cond`) explicitly,
so AutoGraph's conversion of each Python function it reaches (parsing and rewriting its
source) is time and nothing else: about a quarter of the micro model's warm-up (17 -> 12.5 s,
5153093). Without it, a Python `if`/`while` on a tensor inside traced code fails at its
trace, where a test sees it. xtts-bench is not scanned: its dynamic-shape baseline is
written as a user writes it, with TensorFlow's default. The data pipelines' tf.data
functions, which no `tf.function` wraps, are built without AutoGraph by
`xtts_data._autograph` (test_pipeline.py counts their conversions).
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


def _is_tf_function(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "function"
            and isinstance(node.value, ast.Name) and node.value.id == "tf")  # fmt: skip


def _autograph_off(call: ast.Call) -> bool:
    return any(k.arg == "autograph" and isinstance(k.value, ast.Constant)
               and k.value.value is False for k in call.keywords)  # fmt: skip


def _uses(tree: ast.AST) -> list[tuple[int, bool]]:
    """(line, autograph off) of each use of `tf.function` in `tree`: a call is checked for
    `autograph=False`; any other use (a bare `@tf.function`, the function passed on) keeps
    AutoGraph."""
    calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return [(node.lineno, id(node) in calls and _autograph_off(calls[id(node)]))
            for node in ast.walk(tree) if _is_tf_function(node)]  # fmt: skip


def test_a_bare_decorator_counts_as_autograph_on():
    source = "@tf.function\ndef f(): pass\ng = tf.function(f, autograph=False)\nh = tf.function(f)"
    assert sorted(_uses(ast.parse(source))) == [(1, False), (3, True), (4, False)]


def test_every_tf_function_turns_autograph_off():
    uses = [
        (path, line, off) for path in SOURCES for line, off in _uses(ast.parse(path.read_text()))
    ]
    assert len(uses) > 20  # the scan sees the decoding, slots, steps, export ...
    missing = [f"{path.relative_to(PACKAGES)}:{line}" for path, line, off in uses if not off]
    assert not missing, f"tf.function without autograph=False: {missing}"
