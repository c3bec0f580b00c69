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
    "SPEAKER_ENCODERS",
    "AudioBenchConfig",
    "CompilerBenchConfig",
    "DataBenchConfig",
    "GateConfig",
    "PeersBenchConfig",
    "ProfileBenchConfig",
    "StartupBenchConfig",
    "TrainBenchConfig",
]

# What `xtts-bench speakers` turns a clip into (`xtts_bench.speakers`): MFCC and pitch
# statistics, or the GE2E speaker encoder's embedding.
SPEAKER_ENCODERS = ("mfcc", "ge2e")


def _check_overrides(owner: str, overrides) -> None:
    """`--set` values: a tuple of `section.key=value` strings (checked by the stack later)."""
    if isinstance(overrides, str) or not all(isinstance(o, str) for o in overrides):
        raise SettingsError(f"{owner}.overrides: expected a tuple of 'section.key=value' "
                            f"strings, received: {overrides!r}")  # fmt: skip


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
            `xtts-train --set`), e.g. `model.decoder_layers=3`.
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
        _check_overrides("TrainBenchConfig", self.overrides)
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
class _StepBench:
    """The corpus and stack settings of a benchmark of the built train step (`compiler`,
    `profile`): a feature cache, or a demo corpus written for the run.

    Attributes:
        data: a feature cache (None: a demo corpus of `utterances` written for the run);
            `overrides` must match its settings.
        batches: batches drawn to find those of the measured shapes.
        utterances, batch_size, num_buckets, cond_frames, preset, overrides, seed: as
            `TrainBenchConfig`'s.
    """

    data: Path | None = None
    batches: int = 64
    utterances: int = 256
    batch_size: int = 16
    num_buckets: int = 3
    cond_frames: int = 32
    preset: str = "tiny"
    overrides: tuple[str, ...] = ()
    seed: int = 0

    def _check(self, counts: tuple[str, ...]) -> None:
        """`counts` ints >= 1, the cache folder, and the corpus and stack settings."""
        name = type(self).__name__
        for field in ("batches", *counts):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"{name}.{field}: expected an int >= 1, received: "
                                    f"{field}={value!r}")  # fmt: skip
        if self.data is not None and not Path(self.data).is_dir():
            raise SettingsError(f"{name}.data: expected a feature cache folder, received: "
                                f"data={str(self.data)!r}")  # fmt: skip
        self.train_bench()  # the corpus and stack settings, checked by their owner

    def train_bench(self, threads: int = 1) -> TrainBenchConfig:
        """The corpus, batching and stack settings, as `xtts-bench train` has them."""
        return TrainBenchConfig(
            batches=self.batches, utterances=self.utterances, batch_size=self.batch_size,
            num_buckets=self.num_buckets, cond_frames=self.cond_frames, preset=self.preset,
            overrides=self.overrides, seed=self.seed, threads=threads,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompilerBenchConfig(_StepBench):
    """Settings of `xtts-bench compiler`: XLA against TensorFlow's graph executor for the
    train step, the eval step and the decoding loop, at the spec's shapes (the corpus and
    stack settings: `_StepBench`'s).

    Attributes:
        threads: each thread count is measured in its own process, pinned to that many
            cores, with that many intra- and inter-op threads.
        steps: timed train (and eval) steps per shape, after one untimed.
        decode_frames: the decoding buffer (the stop token held off: every call decodes
            it whole); `decode_repeats` timed calls after the first.
    """

    threads: tuple[int, ...] = (1, 2)
    steps: int = 5
    decode_frames: int = 256
    decode_repeats: int = 3

    def __post_init__(self) -> None:
        threads = self.threads
        counts = isinstance(threads, tuple) and threads
        if not (counts and all(type(t) is int and t >= 1 for t in threads)):
            raise SettingsError(f"CompilerBenchConfig.threads: expected a tuple of ints >= 1, "
                                f"received: threads={threads!r}")  # fmt: skip
        self._check(("steps", "decode_frames", "decode_repeats"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class StartupBenchConfig:
    """Settings of `xtts-bench startup`.

    Attributes:
        workloads: `demo` (the demo's training: its own corpus) and/or `default` (the
            default config).
        corpus: the `default` workload's corpus (any layout `xtts-data prepare` reads);
            None: a synthetic corpus of `utterances` clips of 1-10 s.
        utterances, seed: of that synthetic corpus (`utterances` None: 300); `utterances`
            only without a corpus, and `corpus` or `utterances` only with the `default`
            workload (nothing else reads them).
        compiler: every run's `train.compiler` (`auto`: the graph executor on a CPU,
            XLA on a GPU).
    """

    workloads: tuple[str, ...] = ("demo", "default")
    corpus: Path | None = None
    utterances: int | None = None
    seed: int = 0
    compiler: str = "auto"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.workloads) - {"demo", "default"})
        if not self.workloads or unknown:
            raise SettingsError(
                f"StartupBenchConfig.workloads: expected some of ('demo', 'default'), "
                f"received: workloads={self.workloads!r}"
            )
        if self.compiler not in ("auto", "xla", "graph"):
            raise SettingsError(f"StartupBenchConfig.compiler: expected one of ('auto', 'xla', "
                                f"'graph'), received: compiler={self.compiler!r}")  # fmt: skip
        if self.utterances is not None and (isinstance(self.utterances, bool)
                or not isinstance(self.utterances, int) or self.utterances < 1):  # fmt: skip
            raise SettingsError(f"StartupBenchConfig.utterances: expected an int >= 1, "
                                f"received: utterances={self.utterances!r}")  # fmt: skip
        if self.corpus is not None and not Path(self.corpus).is_dir():
            raise SettingsError(f"StartupBenchConfig.corpus: expected a corpus folder, "
                                f"received: corpus={str(self.corpus)!r}")  # fmt: skip
        self._check_corpus_use()

    def _check_corpus_use(self) -> None:
        """`corpus` and `utterances` are the `default` workload's: neither is dropped."""
        corpus = None if self.corpus is None else str(self.corpus)
        given = {"corpus": corpus, "utterances": self.utterances}
        given = {name: value for name, value in given.items() if value is not None}
        received = ", ".join(f"{name}={value!r}" for name, value in given.items())
        if given and "default" not in self.workloads:
            raise SettingsError(
                f"StartupBenchConfig.{' and '.join(given)}: expected the 'default' workload "
                f"(the demo workload writes its own corpus), received: "
                f"workloads={self.workloads!r}, {received}; run --workload default too or "
                f"drop them"
            )
        if len(given) == 2:
            raise SettingsError(
                f"StartupBenchConfig.utterances: expected it only without a corpus (it sizes "
                f"the synthetic one), received: {received}; drop --utterances or --corpus"
            )

    @property
    def synthetic_utterances(self) -> int:
        """Clips of the `default` workload's synthetic corpus."""
        return 300 if self.utterances is None else self.utterances


@dataclasses.dataclass(frozen=True, kw_only=True)
class LearningBenchConfig:
    """One learning-curve run.

    Attributes:
        data: the training feature cache of a run trained here, into `out / "run"`.
        run: instead of `data`, an existing run (`xtts-train fit --workdir RUN`) whose kept
            checkpoints at `every`, `2 * every`, ... `steps` are scored where they are.
        held_out: a cache or corpus of sentences to score (`split` of it).
        out: folder for the run (with `data`), `curve.json` and `curve.png`.
        steps: training steps; a checkpoint is scored every `every` steps.
        split: `"all"` (a corpus the run never saw) or `"val"` (the run's held-out ids).
        n: held-out utterances scored at each checkpoint.
        overrides: `--set` values of the stack config (as `xtts-train fit --set`), for a
            run trained here only.
        voices: `held_out` is a corpus of voices the run never trained on (`demo-corpus
            --held-out-speakers`): each checkpoint speaks every sentence with a clip of
            its own speaker's voice and with one of the next speaker's (the swapped
            control), and the speaker measure (`xtts_bench.speakers`) judges both.
        vocoder: with `voices`, a vocoder run (`fit --task vocoder`) that turns the
            syntheses into the audio the speaker measure hears (None: Griffin-Lim).
        long_form: corpora of long items (several sentences, or sentences longer than the
            training clips) that the last checkpoint also speaks, with the run's sentence
            splitting and without (`xtts_bench.long_form`), `n` items of each.
    """

    data: Path | None = None
    run: Path | None = None
    held_out: Path
    out: Path
    steps: int = 1000
    every: int = 100
    split: str = "all"
    n: int = 24
    overrides: tuple[str, ...] = ()
    voices: bool = False
    vocoder: Path | None = None
    long_form: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        for name in ("steps", "every", "n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"Expected {name} an int >= 1, received: {name}={value!r}")
        if self.steps % self.every:
            raise SettingsError(f"Expected steps a multiple of every, received: "
                                f"steps={self.steps}, every={self.every}")  # fmt: skip
        if (self.data is None) == (self.run is None):
            raise SettingsError(f"Expected either data (a cache to train a run on) or run (a "
                                f"run to score), received: data={self.data}, "
                                f"run={self.run}")  # fmt: skip
        if self.run is not None and self.overrides:
            raise SettingsError(f"Expected no overrides when scoring an existing run (they "
                                f"change only a run trained here), received: "
                                f"run={self.run}, overrides={list(self.overrides)}")  # fmt: skip
        cache = (Path(self.held_out) / "manifest.json").exists()  # the speakers need wavs
        if self.voices and (self.split != "all" or cache):
            raise SettingsError(f"Expected voices with a corpus of held-out voices and split "
                                f"all, received: held_out={str(self.held_out)!r}, "
                                f"split={self.split!r}")  # fmt: skip
        if self.vocoder is not None and not self.voices:
            raise SettingsError(f"Expected a vocoder only with voices (no other figure "
                                f"hears audio), received: vocoder={self.vocoder}, "
                                f"voices=False")  # fmt: skip
        _check_long_form(self.long_form)


PEERS = ("glow_tts", "matcha")  # `xtts-bench peers`' systems beside xtts


@dataclasses.dataclass(frozen=True, kw_only=True)
class PeersBenchConfig:
    """Settings of `xtts-bench peers`: xtts and its peers (Glow-TTS, Matcha-TTS) trained
    side by side, one core each.

    Attributes:
        corpus: the training corpus (any layout `xtts-data prepare` reads).
        held_out: a corpus neither system trains on; its first `n` sentences by id are
            synthesised by both at every scored checkpoint.
        out: folder for both runs, the syntheses, `peers.json` and `peers.png`.
        minutes: wall budget of each system, from its process start (compile included).
        every_minutes: the curve's spacing: each system's checkpoint nearest each
            multiple of it is scored, and its last one.
        n: held-out sentences scored.
        overrides: xtts stack-config `section.key=value` overrides (as `xtts-train fit
            --set`), applied after the bench's own (`train.steps=1000000`, the length of
            xtts's cosine schedule: set it to end the decay within the budget;
            `train.eval_every=0`; `train.checkpoint_every=xtts_checkpoint_every`).
        xtts_checkpoint_every: steps between xtts checkpoints (fit saves by step; the
            nearest to each mark is scored).
        glow_hidden: Glow-TTS encoder, decoder and duration-predictor channels (the
            encoder's feed-forward layers get 4x).
        glow_flows: decoder flow blocks (`num_flow_blocks_dec`).
        glow_encoder_layers: encoder transformer layers.
        glow_batch_size: Glow-TTS utterances per step.
        glow_learning_rate, glow_warmup_steps: RAdam's peak rate and its Noam warm-up.
        matcha_hidden: Matcha-TTS text encoder channels (its feed-forward layers get 4x).
        matcha_encoder_layers: Matcha-TTS text encoder layers.
        matcha_decoder_channels: the channels of both levels of Matcha-TTS's U-Net.
        matcha_batch_size: Matcha-TTS utterances per step.
        matcha_learning_rate: Matcha-TTS Adam learning rate (no schedule, as its recipe).
        peers: the systems trained beside xtts, each on a core of its own: `glow_tts`,
            `matcha` or both.
        cores: the CPU cores of xtts and of each peer in `peers`' order, one each.
        seed: the peers' weights and batch order.
        score_only: train nothing: score the checkpoints an earlier run left in `out`
            (its `trainers.json`), e.g. after its scoring failed; the settings must be
            that run's.
        long_form: corpora of long items (several sentences, or sentences longer than the
            training clips) that each system's last checkpoint also speaks, `n` items of
            each: xtts with its sentence splitting and without, Glow-TTS whole
            (`xtts_bench.long_form`).
    """

    corpus: Path
    held_out: Path
    out: Path
    minutes: float = 45.0
    every_minutes: float = 5.0
    n: int = 24
    overrides: tuple[str, ...] = ()
    xtts_checkpoint_every: int = 200
    glow_hidden: int = 64
    glow_flows: int = 8
    glow_encoder_layers: int = 3
    glow_batch_size: int = 16
    glow_learning_rate: float = 1e-3
    glow_warmup_steps: int = 500
    matcha_hidden: int = 64
    matcha_encoder_layers: int = 3
    matcha_decoder_channels: int = 64
    matcha_batch_size: int = 16
    matcha_learning_rate: float = 1e-3
    peers: tuple[str, ...] = ("glow_tts",)
    cores: tuple[int, ...] = (0, 1)
    seed: int = 0
    score_only: bool = False
    long_form: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        for name in ("n", "xtts_checkpoint_every", "glow_hidden", "glow_flows",
                     "glow_encoder_layers", "glow_batch_size", "glow_warmup_steps",
                     "matcha_hidden", "matcha_encoder_layers", "matcha_decoder_channels",
                     "matcha_batch_size"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"PeersBenchConfig.{name}: expected an int >= 1, "
                                    f"received: {name}={value!r}")  # fmt: skip
        if self.n < 2:
            raise SettingsError(f"PeersBenchConfig.n: expected at least 2 sentences (pairing "
                                f"compares each with the others), received: "
                                f"n={self.n}")  # fmt: skip
        if self.glow_hidden % 2:  # two attention heads split the channels
            raise SettingsError(f"PeersBenchConfig.glow_hidden: expected an even int, "
                                f"received: glow_hidden={self.glow_hidden}")  # fmt: skip
        if self.matcha_hidden % 8:  # 2 heads, rotary embeddings on pairs of half of each
            raise SettingsError(f"PeersBenchConfig.matcha_hidden: expected a multiple of 8, "
                                f"received: matcha_hidden={self.matcha_hidden}")  # fmt: skip
        for name in ("minutes", "every_minutes", "glow_learning_rate", "matcha_learning_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise SettingsError(f"PeersBenchConfig.{name}: expected a number > 0, "
                                    f"received: {name}={value!r}")  # fmt: skip
        if self.every_minutes > self.minutes:
            raise SettingsError(
                f"PeersBenchConfig: expected every_minutes <= minutes, received: "
                f"every_minutes={self.every_minutes}, minutes={self.minutes}"
            )
        peers = self.peers
        if not (isinstance(peers, tuple) and peers and set(peers) <= set(PEERS)
                and len(set(peers)) == len(peers)):  # fmt: skip
            raise SettingsError(f"PeersBenchConfig.peers: expected one or more of "
                                f"{', '.join(PEERS)}, each once, received: "
                                f"peers={peers!r}")  # fmt: skip
        cores, systems = self.cores, 1 + len(peers)
        numbers = isinstance(cores, tuple) and all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cores
        )
        if not (numbers and len(cores) == systems and len(set(cores)) == systems):
            raise SettingsError(f"PeersBenchConfig.cores: expected {systems} different core "
                                f"numbers (xtts, {', '.join(peers)}), received: "
                                f"cores={cores!r}")  # fmt: skip
        if not isinstance(self.score_only, bool):
            raise SettingsError(f"PeersBenchConfig.score_only: expected True or False, "
                                f"received: score_only={self.score_only!r}")  # fmt: skip
        _check_overrides("PeersBenchConfig", self.overrides)
        _check_long_form(self.long_form)
        self.stack()  # an unknown key or invalid value fails here, before any work

    def xtts_settings(self) -> list[str]:
        """The `--set` values of the xtts run: the bench's, then `overrides`."""
        return ["train.steps=1000000", "train.eval_every=0",
                f"train.checkpoint_every={self.xtts_checkpoint_every}",
                "train.keep_checkpoints=100000", *self.overrides]  # fmt: skip

    def stack(self) -> StackConfig:
        """The xtts run's stack config (vocabulary size not yet set)."""
        return load_stack_config(None, self.xtts_settings())


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileBenchConfig(_StepBench):
    """Settings of `xtts-bench profile`: the train step's time op by op (the corpus and
    stack settings: `_StepBench`'s).

    Attributes:
        threads: TensorFlow intra- and inter-op threads (1: ops run one after another, so
            the parts add up to the step).
        compiler: `graph` or `xla` (`train.compiler`, whatever `overrides` say).
        steps: profiled steps, after the warm-up and `warm_steps` unprofiled ones (their
            median is the reference step time).
        bucket: the profiled shape, an index into the spec's shapes (-1: the longest).
        trace_dir: keep the TensorBoard profile here (None: a temporary folder).
    """

    threads: int = 1
    compiler: str = "graph"
    steps: int = 5
    warm_steps: int = 3
    bucket: int = -1
    trace_dir: Path | None = None

    def __post_init__(self) -> None:
        if isinstance(self.bucket, bool) or not isinstance(self.bucket, int):
            raise SettingsError(f"ProfileBenchConfig.bucket: expected an int (-1: the longest "
                                f"shape), received: bucket={self.bucket!r}")  # fmt: skip
        if self.compiler not in ("graph", "xla"):
            raise SettingsError(f"ProfileBenchConfig.compiler: expected 'graph' or 'xla', "
                                f"received: compiler={self.compiler!r}")  # fmt: skip
        self._check(("threads", "steps", "warm_steps"))


def _check_long_form(corpora: tuple[Path, ...]) -> None:
    """Each long-form corpus is a folder: checked before any training, not after it."""
    for corpus in corpora:
        if not Path(corpus).is_dir():
            raise SettingsError(f"Expected each long_form a corpus folder, received: "
                                f"long_form={str(corpus)!r} (not a folder)")  # fmt: skip
