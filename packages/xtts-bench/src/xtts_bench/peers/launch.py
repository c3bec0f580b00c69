"""Processes of `xtts-bench peers`: the optional extra, one core each, the wall budget.

A trainer runs as its own process, pinned to one core before Python starts (the
affinity is inherited by every thread it makes) with one intra- and one inter-op
thread. `Trainer` watches its checkpoint folder and records when each checkpoint
appears, in wall minutes from the process start: compile, data loading and saving
included, as a user pays them; `run_side_by_side` starts both together and stops each
with SIGTERM (both save a checkpoint on it) once its budget is spent.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import tqdm

from xtts_bench.errors import MissingExtraError, SettingsError

__all__ = ["Trainer", "pinned", "require_peers_extra", "run_side_by_side"]

PEERS_HINT = ('run it in the peers environment: hatch run peers:bench-peers ... (or pip '
              'install "xtts-bench[peers,matcha]": coqui-tts, matcha-tts, torch, torchaudio, '
              'torchcodec)')  # fmt: skip
# One thread per framework: TensorFlow's pools, OpenMP/MKL (torch's CPU kernels, NumPy).
ONE_THREAD = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
              "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1"}  # fmt: skip
_STOP_GRACE_S = 600  # a trainer saving its last checkpoint after SIGTERM
_PIN = ("import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])")  # fmt: skip


def require_peers_extra(peers: Sequence[str] = ("glow_tts",)) -> None:
    """Check that what `peers` need is installed, without importing it: torch, and
    coqui-tts for `glow_tts`, matcha-tts for `matcha`.

    Raises:
        MissingExtraError: one of them is not installed (the message names the extra).
    """
    needed = [("torch", "torch", "peers")]
    if "glow_tts" in peers:
        needed.append(("TTS", "coqui-tts", "peers"))
    if "matcha" in peers:
        needed.append(("matcha", "matcha-tts", "matcha"))
    missing = [(name, extra) for module, name, extra in needed
               if importlib.util.find_spec(module) is None]  # fmt: skip
    if missing:
        extras = list(dict.fromkeys(extra for _, extra in missing))
        names = ", ".join(name for name, _ in missing)
        raise MissingExtraError(f"expected the {' and '.join(extras)} extra"
                                f"{'s' if len(extras) > 1 else ''} ({names} not installed); "
                                f"to fix: {PEERS_HINT}")  # fmt: skip


def check_cores(cores: Sequence[int]) -> None:
    """Check that this process may run on every one of `cores`.

    Raises:
        SettingsError: a core outside this process's CPU affinity.
    """
    allowed = os.sched_getaffinity(0)
    if not set(cores) <= allowed:
        raise SettingsError(f"Expected cores this process may use {sorted(allowed)}, received: "
                            f"cores={list(cores)}")  # fmt: skip


def pinned(core: int, argv: Sequence[str]) -> list[str]:
    """A command running `python argv...` on CPU `core` alone."""
    return [sys.executable, "-c", _PIN, str(core), *argv]


@dataclasses.dataclass
class Trainer:
    """One training process and the checkpoints it writes.

    Attributes:
        name: the system's name.
        argv: the Python arguments (`-m module ...`), run pinned to `core`.
        checkpoints: the folder it writes checkpoints into.
        pattern: a regular expression matching a checkpoint file name; group 1 is its step.
        log: its stdout and stderr.
        env: environment variables beside `ONE_THREAD`.
        found: step -> wall minutes from the process start to the checkpoint's appearance.
    """

    name: str
    argv: list[str]
    core: int
    checkpoints: Path
    pattern: str
    log: Path
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    found: dict[int, float] = dataclasses.field(default_factory=dict)
    process: subprocess.Popen | None = None
    started: float = 0.0
    stopped: bool = False

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as log:
            environment = {**os.environ, **ONE_THREAD, **self.env}
            self.process = subprocess.Popen(pinned(self.core, self.argv), stdout=log,
                                            stderr=subprocess.STDOUT, env=environment)  # fmt: skip
        self.started = time.monotonic()

    def minutes(self) -> float:
        return (time.monotonic() - self.started) / 60

    def poll(self) -> None:
        """Record the checkpoints that appeared since the last poll."""
        if not self.checkpoints.is_dir():
            return
        now = self.minutes()  # one time for all new ones: the poll saw them together
        for path in self.checkpoints.iterdir():
            match = re.fullmatch(self.pattern, path.name)
            if match and int(match.group(1)) not in self.found:
                self.found[int(match.group(1))] = now

    def stop(self) -> None:
        if not self.stopped and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.stopped = True

    def failed(self) -> str | None:
        """The log's tail if the process ended with an error before it was stopped."""
        code = self.process.poll()
        if code is None or code == 0:
            return None
        tail = self.log.read_text(errors="replace")[-4000:]
        return f"{self.name} exited with {code} (log {self.log}):\n{tail}"


def run_side_by_side(trainers: Sequence[Trainer], minutes: float, *, poll_s: float = 1.0,
                     progress: bool = True) -> None:  # fmt: skip
    """Start every trainer at once, stop each with SIGTERM after `minutes` of its wall time,
    wait for all to exit, recording their checkpoints all along.

    Raises:
        RuntimeError: a trainer failed (the others are stopped; its log's tail is shown).
    """
    for trainer in trainers:
        trainer.start()
    try:
        with tqdm.tqdm(total=round(minutes * 60), unit="s", desc="peers",
                       disable=not progress) as bar:  # fmt: skip
            while any(t.process.poll() is None for t in trainers):
                time.sleep(poll_s)
                for trainer in trainers:
                    trainer.poll()
                    if trainer.minutes() >= minutes:
                        trainer.stop()
                    if trainer.minutes() >= minutes + _STOP_GRACE_S / 60:
                        trainer.process.kill()
                    if failure := trainer.failed():
                        raise RuntimeError(failure)
                bar.update(min(round(trainers[0].minutes() * 60), bar.total) - bar.n)
    finally:
        for trainer in trainers:
            if trainer.process.poll() is None:
                trainer.stop()
                trainer.process.wait(timeout=_STOP_GRACE_S)
            trainer.poll()
