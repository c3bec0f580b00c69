"""Fault injection: run a CLI in a new process that SIGKILLs itself at a file event.

    python fault_helpers.py EVENT -- MODULE ARGS...

EVENT is one of
- `before:GLOB:N`: at the N-th rename onto a file matching GLOB, before it happens (the
  temp file is complete and synced, the name still holds the old file or nothing);
- `after:GLOB:N`: just after that rename;
- `before:checkpoint:N` / `after:checkpoint:N`: when the N-th
  `tf.train.CheckpointManager.save` is called / has returned (TensorFlow writes
  checkpoints, and their `checkpoint` state file, outside Python).

Every file a cache or a run writes is renamed into place by `os.replace`, so patching it
reaches every writer without a hook in the library. SIGKILL runs no handler, no `finally`
and no `atexit`: the process stops as a power cut or the OOM killer would stop it.
"""

from __future__ import annotations

import fnmatch
import os
import runpy
import signal
import subprocess
import sys
from pathlib import Path

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def run_with_fault(event: str | None, module: str, *args: str, timeout: float = 300,
                   env: dict[str, str] | None = None):  # fmt: skip
    """Run `python -m module args` with `event` armed (None: no fault) in `env` (default:
    this one, TensorFlow quiet); the CompletedProcess, output as text."""
    command = [sys.executable, "-m", module, *args]
    if event is not None:
        command = [sys.executable, __file__, event, "--", module, *args]
    return subprocess.run(command, env=env or ENV, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def killed(process: subprocess.CompletedProcess | subprocess.Popen) -> bool:
    """Whether the (finished) process ended by SIGKILL: its fault went off."""
    return process.returncode == -signal.SIGKILL


def _arm(event: str) -> None:
    when, pattern, nth = event.split(":")
    assert when in ("before", "after"), event
    if pattern == "checkpoint":
        import tensorflow as tf  # only the training CLI's events need it

        manager = tf.train.CheckpointManager
        manager.save = _faulty(manager.save, when, int(nth), lambda *args, **kwargs: True)
    else:
        os.replace = _faulty(os.replace, when, int(nth),
                             lambda src, dst, *_: fnmatch.fnmatch(Path(dst).name, pattern))  # fmt: skip


def _faulty(function, when: str, nth: int, matches):
    """`function`, killing the process before or after its `nth` call that `matches`."""
    seen = [0]

    def call(*args, **kwargs):
        hit = matches(*args, **kwargs)
        seen[0] += hit
        if hit and seen[0] == nth and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = function(*args, **kwargs)
        if hit and seen[0] == nth and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    return call


if __name__ == "__main__":
    event, separator, module, *arguments = sys.argv[1:]
    assert separator == "--", sys.argv
    _arm(event)
    sys.argv = [module, *arguments]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
