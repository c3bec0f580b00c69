"""The public-surface check every package's `test_public_api_*` runs (on `pythonpath`).

A package's surface is its `__all__`: each name importable from the package, the names its
`__init__.py` re-exports (statically, under `if TYPE_CHECKING:`, and lazily through
`xtts_audio.startup.lazy_exports`) exactly those, nothing else public in its namespace,
and every name the rest of the repository reads from the package itself among them.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import pathlib
import types

ROOT = pathlib.Path(__file__).resolve().parents[3]
# Bound by an `__init__.py` besides its re-exports: the lazy-export plumbing.
PLUMBING = frozenset({"TYPE_CHECKING", "lazy_exports"})
# Where the repository's code reads the packages: sources, tests, benchmarks.
_READERS = ("packages/*/src/**/*.py", "packages/*/tests/*.py", "tests/*.py", "benchmarks/*.py")


def init_file(package: str) -> pathlib.Path:
    return ROOT / "packages" / package.replace("_", "-") / "src" / package / "__init__.py"


def reexports(package: str) -> dict[str, str]:
    """{name: defining module} of what `package/__init__.py` imports from its own modules.

    Raises:
        AssertionError: a statement other than the docstring, imports, `__all__` and the
            `__getattr__, __dir__ = lazy_exports(...)` binding (`__init__` only re-exports),
            or an import of a name from outside the package that is not plumbing.
    """
    found: dict[str, str] = {}

    def add(node: ast.stmt) -> None:
        if isinstance(node, ast.Import) or node.module == "__future__":
            return
        names = {alias.asname or alias.name: node.module for alias in node.names}
        if node.module.startswith(f"{package}."):
            found.update(names)
        else:
            assert set(names) <= PLUMBING, f"{package}/__init__.py imports {sorted(names)}"

    for node in ast.parse(init_file(package).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            add(node)
        elif isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for inner in node.body:
                assert isinstance(inner, ast.ImportFrom), ast.unparse(inner)
                add(inner)
        elif not (_is_docstring(node) or _binds(node) in (["__all__"], ["__getattr__", "__dir__"])):
            raise AssertionError(f"{package}/__init__.py does more than re-export: "
                                 f"{ast.unparse(node)[:100]}")  # fmt: skip
    return found


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _binds(node: ast.stmt) -> list[str]:
    """The names an assignment binds (empty for any other statement)."""
    if isinstance(node, ast.AnnAssign):
        targets = [node.target]
    elif isinstance(node, ast.Assign):
        targets = node.targets
    else:
        return []
    names = []
    for target in targets:
        parts = target.elts if isinstance(target, ast.Tuple) else [target]
        names += [part.id for part in parts if isinstance(part, ast.Name)]
    return names


@functools.cache
def _read_from_packages() -> dict[str, dict[str, set[str]]]:
    """{package: {name: files}}: what code reads from a package itself (`from pkg import X`,
    `alias.X` after `import pkg as alias`)."""
    packages = {"xtts_audio", "xtts_data", "xtts_train", "xtts_runtime", "xtts_bench"}
    found: dict[str, dict[str, set[str]]] = {p: {} for p in packages}
    for pattern in _READERS:
        for path in sorted(ROOT.glob(pattern)):
            if path.name == "__init__.py" and path.parent.name in packages:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            aliases = {alias.asname or alias.name: alias.name for node in ast.walk(tree)
                       if isinstance(node, ast.Import) for alias in node.names
                       if alias.name in packages}  # fmt: skip
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in packages:
                    read = [(node.module, alias.name) for alias in node.names]
                elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                      and node.value.id in aliases):  # fmt: skip
                    read = [(aliases[node.value.id], node.attr)]
                else:
                    continue
                for package, name in read:
                    where = str(path.relative_to(ROOT))
                    found[package].setdefault(name, set()).add(where)
    return found


def check_public_surface(package: str) -> None:
    """Assert `package`'s `__all__` is its whole public surface (see the module doc)."""
    module = importlib.import_module(package)
    exported = list(module.__all__)
    assert len(set(exported)) == len(exported), f"{package}.__all__ repeats a name"
    static = reexports(package)
    assert set(static) == set(exported), (
        f"{package}/__init__.py re-exports {sorted(set(static) - set(exported))} outside "
        f"__all__; __all__ names {sorted(set(exported) - set(static))} it does not import"
    )
    for name, source in static.items():  # each importable, and the object typing names
        assert getattr(module, name) is getattr(importlib.import_module(source), name), name
    public = {n for n in dir(module) if not n.startswith("_")} - PLUMBING
    undeclared = {n for n in public - set(exported)
                  if not isinstance(getattr(module, n), types.ModuleType)}  # fmt: skip
    assert not undeclared, f"public in {package} but not in __all__: {sorted(undeclared)}"
    read = _read_from_packages()[package]
    missing = {name: sorted(files) for name, files in read.items()
               if name not in exported and not name.startswith("__")
               and importlib.util.find_spec(f"{package}.{name}") is None}  # fmt: skip
    assert not missing, f"read from {package} but not in its __all__: {missing}"
