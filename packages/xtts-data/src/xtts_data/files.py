"""Files a cache or a run writes: atomically, with the process's permissions, and by one
writer at a time.

- `write_bytes_atomic` / `write_json_atomic` / `write_npy_atomic`: the path is either the
  old file or the complete new one (temp file, fsync, rename); a killed writer leaves at most a
  `.{name}.*.tmp`, which `remove_stale_temp_files` clears at the next start.
- `replaced_folder`: a folder written whole: files go into a staging folder beside it,
  renamed over it at the end; a failed or killed writer leaves the old folder as it was.
- `folder_lock`: one writer per cache folder or work dir. A second one gets a one-line
  `LockError` naming the holder's PID; a lock whose holder died is free again (the kernel
  drops an `flock` with its process), so a killed run never blocks the next.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from xtts_data.errors import LockError, OutputExistsError

__all__ = [
    "folder_lock",
    "remove_stale_temp_files",
    "replaced_folder",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_npy_atomic",
]

LOCK_NAME = ".lock"


def write_json_atomic(path: Path, value: Any) -> None:
    """Write `value` as JSON so that `path` is either the old file or the complete new one."""
    text = json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))


def write_npy_atomic(path: Path, array: Any) -> None:
    """Write `array` as `.npy` (`np.save`) so that `path` is either the old file or the
    complete new one."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array))
    write_bytes_atomic(path, buffer.getvalue())


def _file_mode() -> int:
    """What a plain `open(..., "w")` would give: 0666 less the umask (mkstemp gives 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _file_mode()


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` so that `path` is either the old file or the complete new one, with
    the permissions of any other file the process writes (the umask's). A killed writer
    leaves at most a `.{name}.*.tmp` file, which `remove_stale_temp_files` clears."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_stale_temp_files(folder: Path) -> list[Path]:
    """Remove the temp files killed atomic writers left in `folder` (`.*.tmp`)."""
    stale = sorted(folder.glob(".*.tmp"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


@contextlib.contextmanager
def replaced_folder(out: Path, *, force: bool) -> Iterator[Path]:
    """A staging folder beside `out` to write into; renamed to `out` when the block ends
    without an error, so `out` is either the old folder or the complete new one.

    Raises:
        OutputExistsError: `out` exists and is not empty, and `force` is False (checked
            before the block runs).
    """
    if out.exists() and any(out.iterdir()) and not force:
        raise OutputExistsError(f"{out} exists and is not empty; pass --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield staging
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def folder_lock(folder: Path, *, purpose: str) -> Iterator[None]:
    """Hold `folder/.lock` while the block runs (the folder is created if needed).

    Raises:
        LockError: another live process holds it (its PID, host and purpose named), or
            `folder` is a file.
    """
    if folder.exists() and not folder.is_dir():
        raise LockError(f"{folder} is a file; expected a folder (new, or one to resume)")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, _FILE_MODE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "unknown"
            raise LockError(
                f"{folder} is in use by another process ({holder}); wait for it to finish, "
                f"or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}: {purpose}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock; the file stays (removing it would race)
