"""The settings of `xtts-bench audio`, `compare`, `train` and `gate`, checked once.

A bad value raises `SettingsError` (a `ValueError`): `xtts-bench` prints it as one line.

Kept apart from the benchmarks, which import TensorFlow, librosa and asv: the CLI shows
these defaults in `--help` without loading any of them.
"""

from __future__ import annotations

import dataclasses
import platform
from pathlib import Path

from xtts_bench.errors import SettingsError
from xtts_train import PRESETS, StackConfig, load_stack_config

__all__ = [
    "AudioBenchConfig",
    "DataBenchConfig",
    "GateConfig",
    "StartupBenchConfig",
    "TrainBenchConfig",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AudioBenchConfig:
    """What to measure: `clips` utterances of `min_seconds`-`max_seconds` at the preset's rate."""

    clips: int = 128
    min_seconds: float = 2.0
    max_seconds: float = 10.0
    batch_size: int = 16
    rounds: int = 9
    threads: int = 2
    preset: str = "xtts"

    def __post_init__(self) -> None:
        for name in ("clips", "batch_size", "rounds", "threads"):
            if getattr(self, name) < 1:
                raise SettingsError(
                    f"AudioBenchConfig.{name}: expected >= 1, received: {getattr(self, name)}"
                )
        if self.clips < self.batch_size:
            raise SettingsError(
                f"AudioBenchConfig: expected clips >= batch_size, received: "
                f"clips={self.clips}, batch_size={self.batch_size}"
            )
        if not 0 < self.min_seconds <= self.max_seconds:
            raise SettingsError(
                f"AudioBenchConfig: expected 0 < min_seconds <= max_seconds, received: "
                f"min_seconds={self.min_seconds}, max_seconds={self.max_seconds}"
            )


@dataclasses.dataclass(frozen=True)
class DataBenchConfig:
    """Settings of `xtts-bench compare`.

    Attributes:
        corpus: a corpus to measure on; `None` writes a demo corpus of `utterances`
            utterances of `min_seconds`..`max_seconds` (LJSpeech-like: mean ~6.5 s for 1-10).
        batch_size: utterances per batch (the longest bucket's, for buckets).
        batches: batches timed per pipeline and pass.
        device_ms: simulated device step per batch.
        rounds: alternating rounds per comparison (medians are reported).
        workers: cache-build threads, ours and the baseline's.
        preset: the mel recipe.
    """

    corpus: str | None = None
    utterances: int = 1000
    min_seconds: float = 1.0
    max_seconds: float = 10.0
    batch_size: int = 32
    batches: int = 100
    device_ms: float = 20.0
    rounds: int = 3
    workers: int = 2
    preset: str = "xtts"

    def __post_init__(self) -> None:
        for name in ("utterances", "batch_size", "batches", "rounds", "workers"):
            if getattr(self, name) < 1:
                raise SettingsError(
                    f"DataBenchConfig.{name}: expected >= 1, received: {getattr(self, name)}"
                )
        if not self.device_ms > 0:
            raise SettingsError(
                f"DataBenchConfig.device_ms: expected > 0, received: {self.device_ms}"
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class GateConfig:
    """Settings of `xtts-bench gate`.

    Attributes:
        base, head: git revisions compared (`head` is measured against `base`).
        factor: a benchmark worse by more than this ratio fails (counts: any increase).
        bench: `asv --bench` regular expressions selecting benchmarks (all if empty).
        machine: the asv machine name (default: this host's name), recorded with
            `asv machine --yes` before the run.
        config: the asv.conf.json, relative to the repository.
        extra: further `asv continuous` arguments (e.g. `--quick`, `-a repeat=3`).
    """

    base: str = "HEAD~1"
    head: str = "HEAD"
    factor: float = 1.1
    bench: tuple[str, ...] = ()
    machine: str = dataclasses.field(default_factory=platform.node)
    config: Path = Path("asv.conf.json")
    extra: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.factor, bool) or not (
            isinstance(self.factor, int | float) and self.factor >= 1.0
        ):
            raise SettingsError(
                f"GateConfig.factor: expected a number >= 1.0, received: factor={self.factor!r}"
            )
        if not self.base or not self.head:
            raise SettingsError(f"GateConfig: expected two revisions, received: "
                                f"base={self.base!r}, head={self.head!r}")  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainBenchConfig:
    """Settings of `xtts-bench train`.

    Attributes:
        batches: batches each side of the compile + steps comparison runs.
        utterances, min_seconds, max_seconds: the demo corpus written for the run.
        batch_size, num_buckets, cond_frames: `DataConfig` batching (`buckets` policy:
            `batch_size` is the longest bucket's batch size).
        preset: the `ModelConfig` preset.
        fit_steps: steps of the steady-state `fit` run.
        threads: TensorFlow intra- and inter-op threads.
        dynamic: run the dynamic-shape sides at all (false: only the static side and
            `fit`, e.g. to measure fit's step-time CV against the bare compiled step's).
        graph: also run the dynamic step without XLA (the third row; needs `dynamic`).
        dynamic_budget: a dynamic side stops once its elapsed time exceeds this many times
            the static side's total (0: run every batch). At the defaults a new shape
            costs about a minute on 2 CPU cores and most batches bring one; stopped early,
            a side's ratio is a lower bound and a projection for every batch is reported
            beside it.
        overrides: `section.key=value` stack-config overrides applied last (as
            `xtts-train --set`), e.g. `model.decoder_layers=1`.
        seed: corpus, shuffling and weight initialisation seed.
    """

    batches: int = 200
    utterances: int = 256
    min_seconds: float = 0.4
    max_seconds: float = 1.6
    batch_size: int = 32
    num_buckets: int = 2
    cond_frames: int = 32
    preset: str = "tiny"
    fit_steps: int = 200
    threads: int = 2
    dynamic: bool = True
    graph: bool = True
    dynamic_budget: float = 4.0
    overrides: tuple[str, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batches", "utterances", "batch_size", "num_buckets", "cond_frames",
                     "fit_steps", "threads"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"TrainBenchConfig.{name}: expected an int >= 1, received: "
                                    f"{name}={value!r}")  # fmt: skip
        if isinstance(self.dynamic_budget, bool) or not (
            isinstance(self.dynamic_budget, int | float) and self.dynamic_budget >= 0
        ):
            raise SettingsError(
                f"TrainBenchConfig.dynamic_budget: expected a number >= 0 (0: no limit), "
                f"received: dynamic_budget={self.dynamic_budget!r}"
            )
        if not 0 < self.min_seconds <= self.max_seconds:
            raise SettingsError(
                f"TrainBenchConfig: expected 0 < min_seconds <= max_seconds, received: "
                f"min_seconds={self.min_seconds}, max_seconds={self.max_seconds}"
            )
        if self.preset not in PRESETS:
            raise SettingsError(f"TrainBenchConfig.preset: expected one of {sorted(PRESETS)}, "
                                f"received: preset={self.preset!r}")  # fmt: skip
        if isinstance(self.overrides, str) or not all(isinstance(o, str) for o in self.overrides):
            raise SettingsError(
                f"TrainBenchConfig.overrides: expected a tuple of 'section.key=value' "
                f"strings, received: {self.overrides!r}"
            )
        self.stack()  # an unknown key or invalid value fails here, before any work

    def stack(self) -> StackConfig:
        """The stack config of every run of the benchmark (vocabulary size not yet set)."""
        settings = [
            f"model.preset={self.preset}", f"data.batch_size={self.batch_size}",
            f"data.num_buckets={self.num_buckets}", f"data.cond_frames={self.cond_frames}",
            "data.val_fraction=0.0", f"data.seed={self.seed}", f"train.seed={self.seed}",
            f"train.steps={self.fit_steps}", "train.warmup_steps=10", "train.eval_every=0",
            f"train.log_every={min(50, self.fit_steps)}",
            f"train.checkpoint_every={self.fit_steps}",
        ]  # fmt: skip
        return load_stack_config(None, [*settings, *self.overrides])


@dataclasses.dataclass(frozen=True, kw_only=True)
class StartupBenchConfig:
    """Settings of `xtts-bench startup`.

    Attributes:
        workloads: `demo` (the demo's training) and/or `default` (the default config).
        corpus: the `default` workload's corpus (any layout `xtts-data prepare` reads);
            None: a synthetic corpus of `utterances` clips of 1-10 s.
        utterances, seed: of that synthetic corpus.
    """

    workloads: tuple[str, ...] = ("demo", "default")
    corpus: Path | None = None
    utterances: int = 300
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.workloads) - {"demo", "default"})
        if not self.workloads or unknown:
            raise SettingsError(
                f"StartupBenchConfig.workloads: expected some of ('demo', 'default'), "
                f"received: workloads={self.workloads!r}"
            )
        if isinstance(self.utterances, bool) or not isinstance(self.utterances, int) \
                or self.utterances < 1:  # fmt: skip
            raise SettingsError(f"StartupBenchConfig.utterances: expected an int >= 1, "
                                f"received: utterances={self.utterances!r}")  # fmt: skip
        if self.corpus is not None and not Path(self.corpus).is_dir():
            raise SettingsError(f"StartupBenchConfig.corpus: expected a corpus folder, "
                                f"received: corpus={str(self.corpus)!r}")  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class LearningBenchConfig:
    """One learning-curve run.

    Attributes:
        data: the training feature cache.
        held_out: a cache or corpus of sentences to score (`split` of it).
        out: folder for the run, `curve.json` and `curve.png`.
        steps: training steps; a checkpoint is scored every `every` steps.
        split: `"all"` (a corpus the run never saw) or `"val"` (the run's held-out ids).
        n: held-out utterances scored at each checkpoint.
        overrides: `--set` values of the stack config (as `xtts-train fit --set`).
    """

    data: Path
    held_out: Path
    out: Path
    steps: int = 1000
    every: int = 100
    split: str = "all"
    n: int = 24
    overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("steps", "every", "n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"Expected {name} an int >= 1, received: {name}={value!r}")
        if self.steps % self.every:
            raise SettingsError(f"Expected steps a multiple of every, received: "
                                f"steps={self.steps}, every={self.every}")  # fmt: skip
