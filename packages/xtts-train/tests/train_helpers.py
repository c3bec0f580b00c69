"""Settings shared by the xtts-train tests (on pytest's `pythonpath`)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from xtts_train.config import load_stack_config
from xtts_train.tasks.registry import fit

# Small buckets, short utterances: each compiled step costs seconds, not minutes.
OVERRIDES = [
    "data.batch_size=4", "data.num_buckets=2", "data.cond_frames=16", "data.val_fraction=0.0",
    "train.warmup_steps=4", "train.learning_rate=0.002", "train.log_every=5",
    "train.checkpoint_every=10", "train.eval_every=0",
]  # fmt: skip

# One batch shape: for tests about something other than bucketing (one compile, not two).
ONE_SHAPE = [*OVERRIDES, "data.num_buckets=1"]

# A model smaller than tiny, for tests of plumbing rather than learning: a compile costs
# seconds.
MICRO = [
    "model.d_model=32", "model.heads=2", "model.text_layers=1", "model.decoder_layers=1",
    "model.alignment=content",
    "model.cond_layers=1", "model.cond_latents=2", "model.prenet_dim=32",
    "model.postnet_layers=1", "model.postnet_channels=32", "model.text_convs=1",
    "model.cond_convs=1",
]  # fmt: skip


# The vocoder task on a cache that keeps its waveforms (`audio_cache`): a micro vocoder,
# deterministic segments of 8 frames, checkpoints every 10 steps.
VOCODER = [
    *OVERRIDES, "train.task=vocoder", "data.keep_audio=true", "data.segment_frames=8",
    "data.deterministic=true", "vocoder.dim=32", "vocoder.intermediate=64", "vocoder.layers=1",
]  # fmt: skip


def as_cli(overrides: list[str]) -> list[str]:
    """`--set` arguments of the command line for `overrides`."""
    return [arg for override in overrides for arg in ("--set", override)]


def cli_env(compile_cache: Path | None = None) -> dict[str, str]:
    """The environment of a CLI process: quiet TensorFlow (and the session's `XLA_FLAGS`,
    the root conftest's), and `compile_cache` as its persistent compile cache (default:
    none, so nothing lands in the user's cache)."""
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                XTTS_COMPILE_CACHE=str(compile_cache) if compile_cache else "off")  # fmt: skip


# The console script's entry, after a test's `prelude` (code run first in the process).
_MAIN = """
import sys
from xtts_train.cli import main
sys.argv = ["xtts-train", *sys.argv[1:]]
sys.exit(main())
"""


def train_cli(*args: str, compile_cache: Path | None = None, prelude: str = "",
              timeout: float = 600) -> subprocess.CompletedProcess:  # fmt: skip
    """`xtts-train ARGS` in its own process, as a user runs it (output as text).

    The XLA programs it compiles leave with the process: TensorFlow never frees a compiled
    program, so in-process they would stay in the pytest worker. Processes given the same
    `compile_cache` folder load the programs one of them compiled. `prelude` is Python
    run before the command (a patch, a device setup).
    """
    command = [sys.executable, "-c", prelude + _MAIN, *args]
    return subprocess.run(command, env=cli_env(compile_cache), capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def vocoder_fit(cache: Path, workdir: Path, steps: int) -> dict:
    """`fit` of the `VOCODER` settings to `steps` in this process, one eval at step 20; a
    constant rate after the warm-up (`min_lr_ratio` 1), so a fit to 10 steps then resumed
    to 20 follows the schedule of one fit to 20. Returns the summary."""
    overrides = [*VOCODER, f"train.steps={steps}", "train.min_lr_ratio=1.0",
                 "train.eval_every=20"]  # fmt: skip
    return fit(load_stack_config(None, overrides), cache, workdir, progress=False)


def with_compiler(workdir: Path, folder: Path, compiler: str,
                  skip: tuple[str, ...] = ("tensorboard",)) -> Path:  # fmt: skip
    """A copy of the run `workdir` in `folder`, less `skip`, whose `train.compiler` is
    `compiler`: the session's runs decoded on the graph executor by the tests whose subject
    is not XLA (an XLA decoding program costs 10-20 s a call on a loaded 2-core CPU)."""
    shutil.copytree(workdir, folder, ignore=shutil.ignore_patterns(*skip))
    config = yaml.safe_load((folder / "config.yaml").read_text())
    config["train"]["compiler"] = compiler
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


def once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name` that `build(folder)` fills once per test session, however many
    xdist workers ask (pytest-xdist's recipe): the first builds it while holding a lock,
    the others wait for it and reuse it (`--dist loadfile` may put two files sharing it on
    different workers). Only for folders no test changes."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above each worker's own
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
        if not done.exists():  # a worker that failed to build it left no `done`
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
