"""A persistent XLA compile cache: each program is compiled once per machine, not per run.

TensorFlow can save every XLA executable it compiles and load it in a later process
(`TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=DIR`). Used raw, that cache has four
gaps, and this module closes each:

- **Names.** TensorFlow keys an entry by the traced function's name and a hash of its HLO,
  and both contain counters of the process (`__inference_step_1234`, `cond_true_567`), so
  a process that did any other TensorFlow work first never finds the entry. `stable_names`
  makes the counter values of one trace a function of a key the caller chooses, the same
  in every process.
- **Machines.** Entries are not keyed by TensorFlow's version, by the CPU's instruction
  set (an executable compiled for AVX-512 would load, then fail, on a host without it) or
  by XLA flags. Each such combination gets its own folder: `machine_key()`.
- **Damage.** TensorFlow reads a damaged entry and fails the run (a truncated file is an
  `OutOfRangeError` in the first step). Entries are stored under their SHA-256, checked
  before TensorFlow can see them, and a damaged or foreign one is removed (and so
  compiled again).
- **Sharing.** Each process reads and writes a private staging folder of hard links to
  checked entries; what it compiles is published into the shared store by an atomic link
  named after its checksum, so concurrent processes never see each other's half-written
  files, and two that compile the same program publish the same bytes.

A program compiled inside `collect()` is also remembered by the fingerprint of its traced
function library (`xtts_train.compile.traces.fingerprint`, `CompileCache.remember`), so a
later process can tell from its trace (or its stored trace) alone that the executable is
stored (`CompileCache.holds`) and load it at its first use instead of running it once to
force the load.

Only programs compiled inside `collect()` are published: XLA programs of other TensorFlow
work in the process (tf.data map functions, say) are traced with per-process names, would
never be found again, and stay in the staging folder, which is removed at exit.

The cache lives in `$XDG_CACHE_HOME/xtts/xla` (`~/.cache/xtts/xla`; `~/Library/Caches`
on macOS, `%LOCALAPPDATA%` on Windows); `XTTS_COMPILE_CACHE=DIR` moves it and
`XTTS_COMPILE_CACHE=off` turns it off. `enable()` must run before the process's first XLA
compile: TensorFlow reads its XLA flags once.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import itertools
import json
import logging
import os
import platform
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "ENV",
    "Collected",
    "CompileCache",
    "active",
    "collect",
    "default_root",
    "describe",
    "enable",
    "machine_key",
    "stable_names",
]

logger = logging.getLogger(__name__)

ENV = "XTTS_COMPILE_CACHE"
_FLAG = "--tf_xla_persistent_cache_directory"
# TensorFlow's entry files: <prefix>__<signature hash>__<HLO hash>__<device type>.pb
_NAME = r"[A-Za-z0-9_]+__\d+__\d+__[A-Za-z0-9_]+\.pb"
_ENTRY = re.compile(rf"^{_NAME}$")
_STORED = re.compile(rf"^(?P<entry>{_NAME})\.(?P<sha>[0-9a-f]{{64}})$")  # in the store
_STAGING = re.compile(r"^\.staging-(?P<pid>\d+)-[0-9a-f]+$")
_STALE_SECONDS = 24 * 3600
_PROGRAMS = "programs"  # in the store: <fingerprint> -> the entries its compile wrote


def default_root() -> Path | None:
    """The cache folder: `$XTTS_COMPILE_CACHE` if set (`off`, `0` or empty: none), else the
    platform's user cache folder + `xtts/xla`."""
    value = os.environ.get(ENV)
    if value is not None:
        if value.strip().lower() in ("", "0", "off", "no", "false", "none"):
            return None
        return Path(value).expanduser()
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "xtts" / "xla"


def machine_key() -> str:
    """The store folder's name: TensorFlow's build, this host's CPU and GPUs, XLA flags.

    What TensorFlow keys its entries by (function name and argument shapes, the HLO's
    hash, the device type: so a changed model or batch shape is a new entry) does not
    include these, and an executable is only valid where they match. Computed without
    importing TensorFlow.
    """
    tf_flags = " ".join(f for f in os.environ.get("TF_XLA_FLAGS", "").split()
                        if not f.startswith(_FLAG))  # fmt: skip
    identity = {
        "tensorflow": _tensorflow_build(),
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "cpu": _cpu_identity(),
        "gpus": _gpu_identity(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "tf_xla_flags": tf_flags,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    version = identity["tensorflow"].split()[1] if " " in identity["tensorflow"] else "tf"
    return f"tf{version}-{digest}"


def _tensorflow_build() -> str:
    """Distribution name, version and the size of its core library, e.g. `tensorflow-cpu
    2.21.0 41234567` (two builds of one version differ in size)."""
    names = importlib.metadata.packages_distributions().get("tensorflow", [])
    if not names:
        return "none"
    dist = names[0]
    spec = importlib.util.find_spec("tensorflow")
    size = 0
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for library in Path(folder).glob("libtensorflow_framework*"):
            size = max(size, library.stat().st_size)
    return f"{dist} {importlib.metadata.version(dist)} {size}"


def _cpu_identity() -> str:
    """CPU model and instruction-set flags (Linux), else what `platform` knows."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor()
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "flags", "Features", "CPU part") and key not in fields:
            fields[key] = value.strip()
    return json.dumps(fields, sort_keys=True)


def _gpu_identity() -> str:
    """NVIDIA GPU models and driver (from /proc, no CUDA call) and CUDA_VISIBLE_DEVICES."""
    models = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        with contextlib.suppress(OSError):
            models += [line for line in info.read_text().splitlines() if line.startswith("Model")]
    driver = ""
    with contextlib.suppress(OSError):
        driver = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    return json.dumps([models, driver, os.environ.get("CUDA_VISIBLE_DEVICES")])


@dataclasses.dataclass
class Collected:
    """Entries written (compiled and published) inside one `collect()`."""

    written: list[str] = dataclasses.field(default_factory=list)


class CompileCache:
    """The shared store of checked entries for this machine key, and this process's
    staging folder (TensorFlow's persistent-cache directory).

    Attributes:
        store: `root/machine_key()`: entries named `<TensorFlow's name>.<sha256>`.
        staging: this process's folder of links to the store's checked entries.
        linked: entries offered to TensorFlow at start.
        removed: entries found damaged (or unreadable) at start, and deleted.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.store = self.root / machine_key()
        self.staging = self.store / f".staging-{os.getpid()}-{os.urandom(4).hex()}"
        self.linked: set[str] = set()
        self.removed: list[str] = []
        self.checked = False  # by the first `collect()`: does TensorFlow use it?
        self._lock = threading.Lock()

    def open(self) -> CompileCache:
        """Create the folders, drop stale staging folders, check and link every entry."""
        self.store.mkdir(parents=True, exist_ok=True)
        self._remove_stale_staging()
        self.staging.mkdir()
        copies: dict[str, list[Path]] = {}
        for path in self.store.iterdir():
            match = _STORED.match(path.name)
            if match is None:
                continue
            if _intact(path, match["sha"]):
                copies.setdefault(match["entry"], []).append(path)
            else:
                self._remove(path, "its bytes do not match its checksum")
        for entry, paths in copies.items():
            # Another process opening the store may remove a copy at any point from here.
            mtimes = {p: t for p in paths if (t := _mtime(p)) is not None}
            if not mtimes:
                continue  # compiled again, if it is needed
            *older, newest = sorted(mtimes, key=mtimes.__getitem__)
            for path in older:  # an earlier build of the same program
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            with contextlib.suppress(FileNotFoundError):
                _link_or_copy(newest, self.staging / entry)
                self.linked.add(entry)
        atexit.register(shutil.rmtree, self.staging, ignore_errors=True)
        return self

    def publish(self) -> list[str]:
        """Move entries TensorFlow wrote into the staging folder since the last call into
        the store; returns their names."""
        with self._lock:
            written = []
            for path in sorted(self.staging.iterdir()):
                if not _ENTRY.match(path.name) or path.name in self.linked:
                    continue
                sha = hashlib.sha256(path.read_bytes()).hexdigest()
                target = self.store / f"{path.name}.{sha}"
                if not target.exists():  # same name, same checksum: same bytes
                    _link_or_copy(path, target)
                self.linked.add(path.name)
                written.append(path.name)
            return written

    def forget_unpublished(self) -> None:
        """Mark every entry in staging as seen: programs compiled outside `collect()`
        (per-process names, never found again) are not published later."""
        with self._lock:
            self.linked.update(p.name for p in self.staging.iterdir() if _ENTRY.match(p.name))

    def staged(self) -> set[str]:
        """Entry names in the staging folder now."""
        return {p.name for p in self.staging.iterdir() if _ENTRY.match(p.name)}

    def remember(self, key: str, entries: set[str]) -> None:
        """Record that the program fingerprinted `key` is stored in `entries` (the entries
        that appeared while it compiled: its own, and maybe a concurrent compile's)."""
        folder = self.store / _PROGRAMS
        folder.mkdir(exist_ok=True)
        partial = folder / f".{key}.{os.getpid()}.tmp"
        partial.write_text("".join(f"{entry}\n" for entry in sorted(entries)))
        os.replace(partial, folder / key)

    def holds(self, key: str) -> bool:
        """Whether a program fingerprinted `key` was compiled here before and every entry
        its compile wrote is checked and offered to TensorFlow in this process."""
        try:
            entries = (self.store / _PROGRAMS / key).read_text().split()
        except OSError:
            return False
        with self._lock:
            return bool(entries) and all(entry in self.linked for entry in entries)

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.store.iterdir() if _STORED.match(p.name))

    def entries(self) -> int:
        return sum(1 for p in self.store.iterdir() if _STORED.match(p.name))

    def _remove(self, path: Path, why: str) -> None:
        logger.warning("compile cache: removed %s (%s); it will be compiled again", path, why)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        self.removed.append(path.name)

    def _remove_stale_staging(self) -> None:
        """Staging folders of processes that are gone (killed before their exit hook)."""
        for path in self.store.iterdir():
            match = _STAGING.match(path.name)
            if match and path != self.staging and _stale(path, int(match["pid"])):
                shutil.rmtree(path, ignore_errors=True)


def _mtime(path: Path) -> float | None:
    """The file's modification time; None once it is gone."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None


def _intact(path: Path, sha: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha
    except OSError:
        return False


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link (atomic; same bytes); a copy renamed into place where links fail."""
    try:
        os.link(source, target)
    except FileExistsError:
        pass
    except OSError:
        partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        shutil.copyfile(source, partial)
        os.replace(partial, target)


def _stale(path: Path, pid: int) -> bool:
    with contextlib.suppress(OSError):
        if time.time() - path.stat().st_mtime > _STALE_SECONDS:
            return True
    if os.name != "posix":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


_ACTIVE: CompileCache | None = None


def active() -> CompileCache | None:
    """The cache `enable()` opened in this process, if any."""
    return _ACTIVE


def enable(root: str | Path | None = None) -> CompileCache | None:
    """Turn the persistent compile cache on for this process, before its first XLA compile.

    Args:
        root: the cache folder; default `default_root()` (which may say off).

    Returns:
        The opened cache, or None when it is off or `TF_XLA_FLAGS` already names a
        persistent cache directory (the user's own, left alone).
    """
    global _ACTIVE
    if _ACTIVE is not None:
        return _ACTIVE
    root = Path(root) if root is not None else default_root()
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if root is None or _FLAG in flags:
        return None
    _ACTIVE = CompileCache(root).open()
    os.environ["TF_XLA_FLAGS"] = f"{flags} {_FLAG}={_ACTIVE.staging}".strip()
    logger.info("compile cache: %s (%d entries)", _ACTIVE.store, len(_ACTIVE.linked))
    return _ACTIVE


def describe() -> dict | None:
    """The active cache for a run's summary: folder, entries, size, entries removed, and
    `compiled_outside_collect`: programs XLA compiled since the last `collect()` (a
    program the warm-up left to load at its first call and that missed the cache would
    show here)."""
    cache = _ACTIVE
    if cache is None:
        return None
    with cache._lock:
        outside = len(cache.staged() - cache.linked)
    return {"dir": str(cache.store), "entries": cache.entries(),
            "size_mb": cache.size_bytes() / 2**20, "removed_damaged": cache.removed,
            "compiled_outside_collect": outside}  # fmt: skip


def _check_in_use(cache: CompileCache) -> bool:
    """Whether TensorFlow writes to the staging folder: compile a program that no process
    compiled before (a fresh constant in it) and look for its entry. It fails when XLA
    compiled something before `enable()` set the flag (TensorFlow reads it once)."""
    import tensorflow as tf  # a cache is only checked where TensorFlow runs

    before = {p.name for p in cache.staging.iterdir()}
    nonce = float(int.from_bytes(os.urandom(3), "big"))
    tf.function(lambda: tf.constant(nonce) + 1.0, jit_compile=True, autograph=False)()
    return any(_ENTRY.match(p.name) for p in cache.staging.iterdir() if p.name not in before)


@contextlib.contextmanager
def collect() -> Iterator[Collected]:
    """Publish the entries compiled inside this block (a no-op without a cache).

    The first use checks that TensorFlow really uses the cache; where it does not, the
    cache is turned off for the process (with a warning) so no figure claims a hit.
    """
    global _ACTIVE
    collected = Collected()
    cache = _ACTIVE
    if cache is not None and not cache.checked:
        cache.checked = True
        if not _check_in_use(cache):
            logger.warning(
                "compile cache: off for this process: XLA compiled before it was enabled "
                "(call xtts_train.compile.compile_cache.enable() before any XLA compile)"
            )
            _ACTIVE = cache = None
    if cache is not None:
        cache.forget_unpublished()
    try:
        yield collected
    finally:
        if cache is not None:
            collected.written = cache.publish()


# -- stable names ---------------------------------------------------------------------------

_local = threading.local()
_traces: dict[str, int] = {}
_install_lock = threading.Lock()
_BLOCK = 1 << 24  # uids one trace may use (a train step uses ~10^5)


def _install() -> None:
    """Route TensorFlow's `ops.uid()` through `_uid`, and its recording of each new op's
    Python stack trace through a switch that skips it inside `stable_names` (once per
    process)."""
    # private: the counter and the stack traces have no public switch
    from tensorflow.python.client import pywrap_tf_session
    from tensorflow.python.framework import ops
    from tensorflow.python.util import tf_stack

    with _install_lock:
        if getattr(ops.uid, "_xtts_stable", False):
            return
        original, extract = ops.uid, tf_stack.extract_stack
        record = pywrap_tf_session.TF_SetOpStackTrace

        def uid() -> int:
            counter = getattr(_local, "counter", None)
            return original() if counter is None else next(counter)

        def extract_stack(stacklevel: int = 1):
            if getattr(_local, "counter", None) is None:
                return extract(stacklevel=stacklevel + 1)
            return None

        def set_stack_trace(op, trace) -> None:
            if getattr(_local, "counter", None) is None:
                record(op, trace)

        uid._xtts_stable = True
        ops.uid = uid
        tf_stack.extract_stack = extract_stack
        pywrap_tf_session.TF_SetOpStackTrace = set_stack_trace


@contextlib.contextmanager
def stable_names(key: str) -> Iterator[None]:
    """Trace inside this block with names that depend on `key` only, and no stack traces.

    TensorFlow names functions and control-flow branches after a process-wide counter
    (`ops.uid()`); inside the block the counter counts from a start derived from `key` and
    from how many times this process traced `key` before, far above any value the real
    counter reaches (2^40), so names are the same in every process and never collide with
    other functions of this one.

    Ops made inside the block record no Python stack trace: XLA writes each op's source
    file and line into the program it compiles, so a program traced here and the same
    program registered from its stored library (`xtts_train.compile.traces`) would be two
    programs to the compile cache. A runtime error in such a program names the op, not the
    Python line that made it.
    """
    _install()
    with _install_lock:
        occurrence = _traces.get(key, 0)
        _traces[key] = occurrence + 1
    digest = hashlib.sha256(f"{key}#{occurrence}".encode()).digest()
    start = (1 << 40) + int.from_bytes(digest[:4], "big") % (1 << 30) * _BLOCK
    previous = getattr(_local, "counter", None)
    _local.counter = itertools.count(start)
    try:
        yield
    finally:
        _local.counter = previous
