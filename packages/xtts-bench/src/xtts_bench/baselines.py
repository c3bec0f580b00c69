"""The input pipelines and the train step xtts replaces, written the way TTS repositories
write them.

Straightforward, untuned baselines for side-by-side benchmarks on the same corpus and batch
settings as `xtts_data` and `xtts_train`:

- `librosa_cache_build`: the preprocessing script. `soundfile.read`, `librosa.resample`,
  librosa's mel and the recipe's log scaling per file in a thread pool, one `.npy` per
  utterance (TensorFlowTTS's and the Tacotron 2 ports' `preprocess` steps).
- `npy_dataset`: the "npy cache" training input. `Dataset.map` over file paths calling
  `np.load` through `tf.numpy_function`, then `padded_batch` (TensorFlowTTS's datasets load
  their features with `tf.numpy_function(np.load, ...)`).
- `librosa_dataset`: the "on the fly" training input. The whole decode → resample → mel
  recipe in NumPy/librosa inside `tf.numpy_function`, per sample.
- `npy_segment_dataset`: the vocoder's training input. Per utterance its WAV file and its
  `.npy` mel, a random aligned segment cut in NumPy, all inside `tf.numpy_function`
  (Coqui's `GANDataset` with precomputed features, HiFi-GAN's `MelDataset` fine-tuning).
- `dynamic_train_step`: the training step. `tf.function(jit_compile=True)` with no
  `input_signature`, fed batches padded to their own longest row (`trim_to_longest`, what
  `padded_batch` without `padded_shapes` emits): every new batch shape retraces the Python
  function and recompiles the XLA program, in the middle of training.

Why the input pipelines starve an accelerator: each element crosses into Python, and the
Python body runs holding the GIL (NumPy and librosa release it only inside a few large
kernels), so `num_parallel_calls` adds threads that mostly wait for each other.
Per-element interpreter overhead caps throughput near a thousand samples/s for the `.npy`
case, and the librosa case spends milliseconds of GIL-bound work per sample: the device
waits on input, and its utilisation swings with how long each batch's files happen to be.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import math
import pathlib
import time
from collections.abc import Callable, Mapping, Sequence

import librosa
import numpy as np
import soundfile
import tensorflow as tf

import xtts_audio as xa
from xtts_bench.audio import librosa_mel
from xtts_bench.errors import SettingsError
from xtts_train import AdamW, TextToMel, TextToMelConfig, TrainConfig, total_loss, warmup_cosine

__all__ = [
    "BuildStats",
    "DynamicStep",
    "Utterance",
    "dynamic_train_step",
    "librosa_cache_build",
    "librosa_dataset",
    "npy_dataset",
    "npy_segment_dataset",
    "trim_to_longest",
]


@dataclasses.dataclass(frozen=True)
class Utterance:
    """One corpus row as the baselines take it: an id, its audio file and its token ids."""

    id: str
    wav_path: pathlib.Path
    tokens: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class BuildStats:
    """What a cache build did: files written, seconds of source audio, wall-clock seconds."""

    files: int
    audio_seconds: float
    wall_seconds: float

    @property
    def seconds_per_second(self) -> float:
        """Seconds of audio processed per wall-clock second."""
        return self.audio_seconds / self.wall_seconds if self.wall_seconds > 0 else math.inf


def _read_audio(
    path: str | pathlib.Path, sample_rate: int, res_type: str
) -> tuple[np.ndarray, float]:
    """Mono float32 [samples] at `sample_rate`, and the file's duration in seconds."""
    audio, rate = soundfile.read(path, dtype="float32")
    if audio.ndim == 2:
        audio = audio.mean(axis=1)
    seconds = len(audio) / rate
    if rate != sample_rate:
        audio = librosa.resample(audio, orig_sr=rate, target_sr=sample_rate, res_type=res_type)
    return audio, seconds


def _scale(mel: np.ndarray, config: xa.MelConfig) -> np.ndarray:
    """Linear mel → the recipe's features in NumPy, as the repos' audio processors do it.

    The same formulas as `xtts_audio.normalize`, which the tests hold this to.
    """
    if config.log == "none":
        return mel
    floored = np.maximum(mel, config.amin)
    if config.log == "ln":
        return np.log(floored)
    if config.log == "log10":
        return np.log10(floored)
    db = 20.0 / config.power * np.log10(floored)
    if config.top_db is not None:
        db = np.maximum(db, db.max() - config.top_db)
    db = db - config.ref_level_db
    if config.min_level_db is None:
        return db
    scaled = (db - config.min_level_db) / -config.min_level_db
    low = -config.max_norm if config.symmetric_norm else 0.0
    scaled = (2.0 * scaled - 1.0 if config.symmetric_norm else scaled) * config.max_norm
    return np.clip(scaled, low, config.max_norm) if config.clip_norm else scaled


def _features_of(config: xa.MelConfig, res_type: str) -> Callable[[str], tuple[np.ndarray, float]]:
    """path → (float32 [frames, n_mels] features, source seconds): the per-file recipe."""
    mel_of = librosa_mel(config)

    def features(path: str) -> tuple[np.ndarray, float]:
        audio, seconds = _read_audio(path, config.sample_rate, res_type)
        mel = _scale(mel_of(audio), config)  # (n_mels, frames)
        return np.ascontiguousarray(mel.T, dtype=np.float32), seconds

    return features


def librosa_cache_build(
    utterances: Sequence[Utterance],
    config: xa.MelConfig,
    out_dir: str | pathlib.Path,
    *,
    workers: int = 2,
    res_type: str = "soxr_hq",
) -> BuildStats:
    """Write `out_dir / f"{id}.npy"` (float32 [frames, n_mels]) per utterance, `workers` threads.

    Args:
        utterances: the files to process.
        config: the mel recipe; audio at another rate is resampled to `config.sample_rate`.
        out_dir: created if missing.
        workers: threads of the `ThreadPoolExecutor`.
        res_type: `librosa.resample`'s method.

    Returns:
        The files written, the seconds of source audio and the wall-clock seconds taken.
    """
    _check_positive(workers=workers)
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    features = _features_of(config, res_type)

    def build(utterance: Utterance) -> float:
        mel, seconds = features(str(utterance.wav_path))
        np.save(out_dir / f"{utterance.id}.npy", mel)
        return seconds

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        seconds = list(pool.map(build, utterances))
    wall = time.perf_counter() - start
    return BuildStats(files=len(seconds), audio_seconds=float(sum(seconds)), wall_seconds=wall)


def npy_dataset(
    utterances: Sequence[Utterance],
    npy_dir: str | pathlib.Path,
    *,
    batch_size: int,
    max_frames: int,
    max_text_len: int,
    n_mels: int,
    shuffle: bool = True,
    seed: int = 0,
) -> tf.data.Dataset:
    """Batches of cached `.npy` mels, each loaded by `np.load` inside `tf.numpy_function`.

    Utterances with more than `max_frames` frames (read from the `.npy` headers) or more
    than `max_text_len` tokens are dropped up front.

    Args:
        utterances: the rows; `npy_dir / f"{id}.npy"` must exist for each.
        npy_dir: the folder `librosa_cache_build` wrote.
        batch_size, max_frames, max_text_len: every batch is padded to these (B, T, L).
        n_mels: mel bands of the cached features.
        shuffle, seed: shuffle the whole file list each epoch, seeded.

    Returns:
        Batches of dict(tokens int32 [B, L], token_lengths int32 [B],
        mel float32 [B, T, n_mels], mel_lengths int32 [B]), the last partial batch dropped.
    """
    _check_positive(batch_size=batch_size, max_frames=max_frames, max_text_len=max_text_len)
    _check_positive(n_mels=n_mels)
    paths = [str(pathlib.Path(npy_dir) / f"{u.id}.npy") for u in utterances]
    frames = [np.load(p, mmap_mode="r").shape[0] for p in paths]
    kept = [i for i, u in enumerate(utterances) if _fits(u, frames[i], max_frames, max_text_len)]
    tokens, token_lengths = _token_table([utterances[i] for i in kept], max_text_len)
    ds = tf.data.Dataset.from_tensor_slices(([paths[i] for i in kept], tokens, token_lengths))
    ds = _shuffled(ds, len(kept), shuffle, seed)

    def load(path: bytes) -> np.ndarray:
        return np.array(np.load(path.decode(), mmap_mode="r"), dtype=np.float32)

    def element(path, tokens, token_length):
        mel = tf.numpy_function(load, [path], tf.float32)
        return _element(mel, tokens, token_length, n_mels)

    ds = ds.map(element, num_parallel_calls=tf.data.AUTOTUNE)
    return _batched(ds, batch_size, max_frames, max_text_len, n_mels)


def librosa_dataset(
    utterances: Sequence[Utterance],
    config: xa.MelConfig,
    *,
    batch_size: int,
    max_frames: int,
    max_text_len: int,
    shuffle: bool = True,
    seed: int = 0,
    res_type: str = "soxr_hq",
) -> tf.data.Dataset:
    """Batches of mels computed on the fly: read, resample, librosa mel in `tf.numpy_function`.

    Utterances with more than `max_text_len` tokens are dropped up front; those whose mel
    has more than `max_frames` frames are dropped after computing it (`Dataset.filter`).

    Args:
        utterances: the rows.
        config: the mel recipe; audio at another rate is resampled to `config.sample_rate`.
        batch_size, max_frames, max_text_len: every batch is padded to these (B, T, L).
        shuffle, seed: shuffle the whole file list each epoch, seeded.
        res_type: `librosa.resample`'s method.

    Returns:
        Batches laid out as `npy_dataset`'s, with n_mels = `config.n_mels`.
    """
    _check_positive(batch_size=batch_size, max_frames=max_frames, max_text_len=max_text_len)
    kept = [u for u in utterances if _fits(u, 0, max_frames, max_text_len)]
    tokens, token_lengths = _token_table(kept, max_text_len)
    paths = [str(u.wav_path) for u in kept]
    ds = tf.data.Dataset.from_tensor_slices((paths, tokens, token_lengths))
    ds = _shuffled(ds, len(kept), shuffle, seed)
    features = _features_of(config, res_type)

    def element(path, tokens, token_length):
        mel = tf.numpy_function(lambda p: features(p.decode())[0], [path], tf.float32)
        return _element(mel, tokens, token_length, config.n_mels)

    ds = ds.map(element, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.filter(lambda e: e["mel_lengths"] <= max_frames)
    return _batched(ds, batch_size, max_frames, max_text_len, config.n_mels)


def npy_segment_dataset(
    utterances: Sequence[Utterance],
    npy_dir: str | pathlib.Path,
    config: xa.MelConfig,
    *,
    batch_size: int,
    segment_frames: int,
    shuffle: bool = True,
    seed: int = 0,
    res_type: str = "soxr_hq",
) -> tf.data.Dataset:
    """Batches of random aligned mel/waveform segments, cut in NumPy in `tf.numpy_function`.

    Per utterance, as Coqui's `GANDataset` (precomputed features) does it: the WAV file is
    read (resampled when its rate is not `config.sample_rate`) and its `.npy` mel loaded,
    a start frame s drawn uniformly from [0, frames - segment_frames], and mel rows
    s .. s + segment_frames - 1 cut with the `segment_frames * hop_length` samples from
    s * hop_length on (mel frame i is centred on sample i * hop_length), zero-padded past
    the waveform's end. Utterances of fewer than `segment_frames` frames (read from the
    `.npy` headers) are dropped up front.

    Args:
        utterances: the rows; `npy_dir / f"{id}.npy"` must exist for each.
        npy_dir: the folder `librosa_cache_build` wrote (float32 [frames, n_mels] each).
        config: the mel recipe of those features (`sample_rate`, `hop_length`, `n_mels`).
        batch_size: segments per batch.
        segment_frames: mel frames per segment.
        shuffle, seed: shuffle the whole file list each epoch, seeded; `seed` also seeds
            the start frames.
        res_type: `librosa.resample`'s method.

    Returns:
        Batches of dict(mel float32 [B, segment_frames, n_mels], audio float32
        [B, segment_frames * hop_length]), the last partial batch dropped.
    """
    _check_positive(batch_size=batch_size, segment_frames=segment_frames)
    samples = segment_frames * config.hop_length
    mels = [str(pathlib.Path(npy_dir) / f"{u.id}.npy") for u in utterances]
    kept = [i for i, path in enumerate(mels)
            if np.load(path, mmap_mode="r").shape[0] >= segment_frames]  # fmt: skip
    if not kept:
        raise SettingsError(f"Expected at least one utterance of segment_frames="
                            f"{segment_frames} frames or more, received: none that long "
                            f"(lower segment_frames)")  # fmt: skip
    wavs = [str(utterances[i].wav_path) for i in kept]
    ds = tf.data.Dataset.from_tensor_slices(([mels[i] for i in kept], wavs))
    ds = _shuffled(ds, len(kept), shuffle, seed)
    rng = np.random.default_rng(seed)  # its bit generator locks: safe across map threads

    def cut(mel_path: bytes, wav_path: bytes) -> tuple[np.ndarray, np.ndarray]:
        mel = np.load(mel_path.decode(), mmap_mode="r")  # (F, n_mels)
        audio, _ = _read_audio(wav_path.decode(), config.sample_rate, res_type)
        start = int(rng.integers(0, len(mel) - segment_frames + 1))
        piece = audio[start * config.hop_length :][:samples]  # (<= samples,)
        return (np.array(mel[start : start + segment_frames], np.float32),
                np.pad(piece, (0, samples - len(piece))).astype(np.float32))  # fmt: skip

    def element(mel_path, wav_path):
        mel, audio = tf.numpy_function(cut, [mel_path, wav_path], [tf.float32, tf.float32])
        return {"mel": tf.ensure_shape(mel, [segment_frames, config.n_mels]),
                "audio": tf.ensure_shape(audio, [samples])}  # fmt: skip

    ds = ds.map(element, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SettingsError(f"Expected {name} to be an int >= 1, received: {name}={value!r}")


def _fits(utterance: Utterance, frames: int, max_frames: int, max_text_len: int) -> bool:
    return len(utterance.tokens) <= max_text_len and frames <= max_frames


def _token_table(kept: Sequence[Utterance], max_text_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids zero-padded to int32 [N, max_text_len], and their lengths int32 [N]."""
    if not kept:
        raise SettingsError(
            "Expected at least one utterance within max_frames and max_text_len, received: "
            "none fits (raise the limits)"
        )
    tokens = np.zeros((len(kept), max_text_len), np.int32)
    for row, utterance in enumerate(kept):
        tokens[row, : len(utterance.tokens)] = utterance.tokens
    return tokens, np.array([len(u.tokens) for u in kept], np.int32)


def _shuffled(ds: tf.data.Dataset, size: int, shuffle: bool, seed: int) -> tf.data.Dataset:
    return ds.shuffle(size, seed=seed, reshuffle_each_iteration=True) if shuffle else ds


def _element(mel: tf.Tensor, tokens: tf.Tensor, token_length: tf.Tensor, n_mels: int) -> dict:
    mel.set_shape([None, n_mels])  # numpy_function outputs have unknown shape
    return {
        "tokens": tokens,
        "token_lengths": token_length,
        "mel": mel,
        "mel_lengths": tf.shape(mel, out_type=tf.int32)[0],
    }


def _batched(
    ds: tf.data.Dataset, batch_size: int, max_frames: int, max_text_len: int, n_mels: int
) -> tf.data.Dataset:
    """Every batch padded to the same static shapes, the last partial batch dropped."""
    shapes = {
        "tokens": [max_text_len],
        "token_lengths": [],
        "mel": [max_frames, n_mels],
        "mel_lengths": [],
    }
    ds = ds.padded_batch(batch_size, padded_shapes=shapes, drop_remainder=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def trim_to_longest(batch: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """`batch` cut to its own longest text and mel: what `padded_batch` with no
    `padded_shapes` emits, so the shape changes from batch to batch.

    Args:
        batch: `DatasetSpec` fields; `tokens`, `token_mask` [B, T] are cut to
            `max(token_lengths)`, `mel` [B, F, M], `mel_mask`, `stop_targets` [B, F] to
            `max(mel_lengths)`; the rest (lengths, `cond_mel`, `speaker`) is kept.
    """
    text = int(tf.reduce_max(batch["token_lengths"]))
    frames = int(tf.reduce_max(batch["mel_lengths"]))
    cut = {"tokens": text, "token_mask": text, "mel": frames, "mel_mask": frames,
           "stop_targets": frames}  # fmt: skip
    return {name: value[:, : cut[name]] if name in cut else value for name, value in batch.items()}


class DynamicStep:
    """A train step compiled per input shape as it arrives; see `dynamic_train_step`.

    Attributes:
        traces: Python traces per (batch, text, frames).
    """

    def __init__(self, model: TextToMel, optimizer: AdamW, config: TrainConfig,
                 losses: TextToMelConfig, *, jit_compile: bool) -> None:  # fmt: skip
        self.model, self.optimizer, self.config, self.losses = model, optimizer, config, losses
        self.schedule = warmup_cosine(
            peak=config.learning_rate,
            warmup_steps=config.warmup_steps,
            total_steps=config.steps,
            min_ratio=config.min_lr_ratio,
        )
        self.traces: collections.Counter = collections.Counter()
        self._step = tf.function(self._train_step, jit_compile=jit_compile)

    def __call__(self, batch: Mapping[str, tf.Tensor], *, step: int) -> dict[str, tf.Tensor]:
        """Update `step` + 1 on `batch` (any shapes); returns the float32 scalar losses."""
        return self._step(dict(batch), tf.constant(self.schedule(step), tf.float32))

    def _train_step(self, batch, learning_rate):
        b, t = batch["tokens"].shape
        self.traces[(b, t, batch["mel"].shape[1])] += 1  # runs once per trace
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(batch, training=True)
            weights = self.losses
            losses = total_loss(outputs, batch, stop_weight=weights.stop_weight,
                                pos_weight=weights.stop_pos_weight,
                                guided_weight=weights.guided_attention_weight,
                                guided_sigma=weights.guided_attention_sigma)  # fmt: skip
        grads = tape.gradient(losses["loss"], variables)
        grads, _ = tf.clip_by_global_norm(grads, self.config.clip_norm)
        self.optimizer.apply(
            grads, variables, learning_rate=learning_rate, weight_decay=self.config.weight_decay
        )
        return losses


def dynamic_train_step(
    model: TextToMel,
    optimizer: AdamW,
    config: TrainConfig,
    losses: TextToMelConfig,
    *,
    jit_compile: bool = True,
) -> DynamicStep:
    """The train step as training scripts in the wild write it: a `tf.function` with no
    `input_signature`.

    The same model, losses, clipping and optimizer as `xtts_train`'s compiled step, minus
    its non-finite gate. Every batch of a shape not seen before traces the Python function
    again and, with `jit_compile`, compiles a new XLA program before it runs; without it
    the new graph runs op by op. (`reduce_retracing=True` cannot help here: `TextToMel`
    needs static shapes, and a trace with unknown dimensions fails.)

    Args:
        model: a built `TextToMel`.
        optimizer: built on `model.trainable_variables`.
        config: the schedule (`learning_rate`, `warmup_steps`, `steps`, `min_lr_ratio`),
            `clip_norm` and `weight_decay`.
        losses: the loss weights (`stop_weight`, `stop_pos_weight`, `guided_attention_*`).
        jit_compile: compile each traced shape with XLA.

    Returns:
        The step: call it on a batch of `DatasetSpec` fields; its `traces` counts traces.
    """
    return DynamicStep(model, optimizer, config, losses, jit_compile=jit_compile)
