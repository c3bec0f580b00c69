"""The package graph is audio <- data <- train <- serve <- bench, and xtts_audio needs only TF +
NumPy."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("xtts_audio", "xtts_data", "xtts_train", "xtts_runtime", "xtts_serve", "xtts_bench")
# What each package may import from the project, left of it in the graph.
ALLOWED_FIRST_PARTY = {
    "xtts_audio": {"xtts_audio"},
    "xtts_data": {"xtts_audio", "xtts_data"},
    "xtts_train": {"xtts_audio", "xtts_data", "xtts_train"},
    # xtts_train for --runtime tf, xtts_runtime for --runtime onnx.
    "xtts_serve": {"xtts_audio", "xtts_data", "xtts_train", "xtts_runtime", "xtts_serve"},
    "xtts_bench": set(PACKAGES),
    # Beside xtts_train, not above it: the TF-free parts below it (the text front end,
    # clips, the audio config) and itself only.
    "xtts_runtime": {"xtts_audio", "xtts_data", "xtts_runtime"},
}


def _source_dir(package: str) -> pathlib.Path:
    return ROOT / "packages" / package.replace("_", "-") / "src" / package


def _imported_modules(package: str) -> dict[str, set[str]]:
    """Top-level module names imported anywhere (functions included) in a package: {name: files}."""
    found: dict[str, set[str]] = {}
    for path in sorted(_source_dir(package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(path.name)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_first_party_imports_point_left(package):
    imported = _imported_modules(package)
    wrong = {m: f for m, f in imported.items() if m.startswith("xtts_")}
    wrong = {m: f for m, f in wrong.items() if m not in ALLOWED_FIRST_PARTY[package]}
    assert not wrong, f"{package} imports {wrong}; allowed: {sorted(ALLOWED_FIRST_PARTY[package])}"


# What xtts_serve may read from one of xtts_train's modules rather than the package: the
# compile cache's location, which a console script prints in `--help` before TensorFlow.
_TRAIN_MODULES_ALLOWED = {"xtts_train.compile"}


@pytest.mark.parametrize("package", ["xtts_bench", "xtts_serve"])
def test_packages_above_read_xtts_train_through_its_public_surface(package):
    """xtts_bench (and the asv suite) and xtts_serve import xtts_train's names from the
    package (its `__all__`), never from its modules."""
    files = [*_source_dir(package).rglob("*.py")]
    if package == "xtts_bench":
        files += (ROOT / "benchmarks").glob("*.py")
    reaching = sorted(
        f"{path.name}: from {node.module} import ..."
        for path in files
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xtts_train.")
        and not (package == "xtts_serve" and node.module in _TRAIN_MODULES_ALLOWED)
    )  # fmt: skip
    assert files
    assert not reaching, reaching


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_another_modules_private_names(package):
    """`from xtts_x.module import _name` only of a private module's own names (`_filters`,
    a module of its package, may be imported; `_helper` of another module may not): a
    helper two modules share is public where it lives."""
    reaching = sorted(
        f"{path.relative_to(_source_dir(package).parent)}: from {node.module} import {alias.name}"
        for path in sorted(_source_dir(package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xtts_")
        for alias in node.names
        if alias.name.startswith("_") and not _is_module(node.module, alias.name)
    )
    assert not reaching, reaching


def _is_module(parent: str, name: str) -> bool:
    """`parent.name` is a module or package of the project (not a name in a module)."""
    top, *rest = parent.split(".")
    base = _source_dir(top).joinpath(*rest, name)
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def test_xtts_audio_imports_only_tensorflow_numpy_and_stdlib():
    allowed = set(sys.stdlib_module_names) | {"tensorflow", "numpy", "xtts_audio"}
    imported = _imported_modules("xtts_audio")
    assert imported, "scan found no imports: wrong source path?"
    extra = {m: f for m, f in imported.items() if m not in allowed}
    assert not extra, f"xtts_audio imports {extra}"


def test_importing_xtts_audio_loads_no_test_extras_or_other_packages():
    # TensorFlow imports scipy by itself when it is installed: count only what xtts_audio adds.
    code = (
        "import sys, tensorflow\n"
        "before = set(sys.modules)\n"
        "import xtts_audio\n"
        "bad = {'librosa', 'soundfile', 'scipy', 'xtts_data', 'xtts_train', 'xtts_bench'}\n"
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_xtts_audio_install_requirements_are_numpy_and_tensorflow_only():
    project = tomllib.loads((ROOT / "packages/xtts-audio/pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["numpy>=1.26"]
    extras = project["optional-dependencies"]
    for extra in ("cpu", "cuda", "tensorflow"):
        assert all(req.startswith("tensorflow") for req in extras[extra]), extras[extra]


@pytest.mark.parametrize("package", PACKAGES[1:])
def test_no_package_depends_on_one_to_its_right(package):
    project = tomllib.loads((_source_dir(package).parents[1] / "pyproject.toml").read_text())
    names = {
        req.split("[")[0].split(">")[0].split("=")[0].strip()
        for req in project["project"]["dependencies"]
    }
    index = PACKAGES.index(package)
    right = {p.replace("_", "-") for p in PACKAGES[index + 1 :]}
    assert not names & right, f"{package} depends on {names & right}"


def test_xtts_runtime_installs_without_tensorflow_or_xtts_train():
    """The runtime's distribution and its project's below it (xtts-data, xtts-audio)
    name no TensorFlow and no xtts-train: `pip install xtts-runtime` brings neither."""
    for name in ("xtts-runtime", "xtts-data", "xtts-audio"):
        project = tomllib.loads((ROOT / "packages" / name / "pyproject.toml").read_text())
        needs = [req.lower() for req in project["project"]["dependencies"]]
        assert not [r for r in needs if r.startswith(("tensorflow", "xtts-train"))], (name, needs)


def test_xtts_data_s_tensorflow_free_modules_import_without_it():
    """The modules packages/xtts-data/README.md ("Without TensorFlow") names import with
    `tensorflow` unimportable: what xtts-runtime reads through them."""
    code = (
        "import sys\n"
        "sys.modules['tensorflow'] = None\n"
        "import xtts_data.text, xtts_data.sentences, xtts_data.pieces, xtts_data.clips\n"
        "import xtts_data.voice_folder, xtts_data.files\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
