"""Inside xtts_train each folder is a layer and imports only the layers below it (DESIGN.md,
"layers that point down"; STYLE.md rule 1): an import back up, even one inside a function,
means a module sits in the wrong folder. Pure `ast`: nothing here imports TensorFlow."""

from __future__ import annotations

import ast
import pathlib

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[1] / "src" / "xtts_train"
# Bottom to top. A folder is its own layer; of the modules at the top level, `errors` and
# `config` are the bottom and the rest (`__init__`, cli, check, synthesize, vocode, export,
# demo) are the commands.
LAYERS = (
    "errors",
    "config",
    "compile",
    "models",
    "runs",
    "training",
    "inference",
    "evaluation",
    "tasks",
    "commands",
)


def _module(path: pathlib.Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    """The layer of `xtts_train[.part...]`: its folder, `errors`/`config`, or the commands."""
    parts = module.split(".")
    if len(parts) == 1:
        return "commands"  # the package's __init__
    if (SOURCE / parts[1]).is_dir():
        assert parts[1] in LAYERS, f"xtts_train/{parts[1]}/ is no layer: add it to LAYERS"
        return parts[1]
    return parts[1] if parts[1] in LAYERS else "commands"


def _imports(path: pathlib.Path) -> list[str]:
    """Every xtts_train module `path` imports, at the top or inside a function: for
    `from xtts_train[.x] import name`, `xtts_train[.x].name` (a name of a module's is
    judged by its module's layer, a submodule's by its own)."""
    me = _module(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, `level - 1` up
                package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            found += [f"{base}.{alias.name}" for alias in node.names]
    return [name for name in found if name.split(".")[0] == "xtts_train"]


def _upward(path: pathlib.Path) -> list[str]:
    mine = LAYERS.index(_layer(_module(path)))
    return sorted(
        f"{path.relative_to(SOURCE.parent)} -> {name} ({_layer(name)} is above "
        f"{_layer(_module(path))})"
        for name in _imports(path)
        if LAYERS.index(_layer(name)) > mine
    )


FILES = sorted(SOURCE.rglob("*.py"))


def test_the_scan_sees_every_layer():
    assert FILES, f"no sources under {SOURCE}"
    seen = {_layer(_module(path)) for path in FILES}
    assert seen == set(LAYERS), f"layers without a module: {set(LAYERS) - seen}"
    assert sum(len(_imports(path)) for path in FILES) > 100


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SOURCE)))
def test_imports_point_down(path):
    upward = _upward(path)
    assert not upward, "imports from a layer above:\n" + "\n".join(upward)


def test_an_upward_import_inside_a_function_is_caught(tmp_path, monkeypatch):
    folder = tmp_path / "xtts_train" / "models"
    folder.mkdir(parents=True)
    (folder / "lazy.py").write_text(
        "def f():\n    from xtts_train.training.steps import shape_of\n    return shape_of\n"
    )
    (tmp_path / "xtts_train" / "training").mkdir()
    monkeypatch.setattr(f"{__name__}.SOURCE", tmp_path / "xtts_train")
    assert _upward(folder / "lazy.py") == [
        "xtts_train/models/lazy.py -> xtts_train.training.steps.shape_of (training is above models)"
    ]
