"""Where `make_dataset` gets utterances: a feature cache, or WAV files decoded on the fly.

Both give the same elements — `frames`, `speaker` and `split` (the id's split bucket)
int32 scalars, `tokens` int32 [T], `mel` float32 [F, n_mels] — and every utterance's
lengths before the pipeline runs, so the batch shapes can be planned. A cache built with
`data.keep_audio` adds `audio` float32 [S] for the readers that ask for it (the vocoder's
segments); the text-to-mel elements leave it out, so nothing downstream holds it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile
import tensorflow as tf

from xtts_audio import (
    MelConfig,
    decode_wav,
    mel_features,
    num_frames,
    resample,
    resampled_length,
    to_mono,
    trim_silence,
)
from xtts_data import record
from xtts_data._audio_io import load_audio
from xtts_data._transcripts import read_transcripts
from xtts_data.config import DataConfig
from xtts_data.corpus import Corpus, Skipped, read_corpus
from xtts_data.errors import CacheError, ConfigError, CorpusError
from xtts_data.manifest import FeatureCache
from xtts_data.text import Tokenizer

__all__ = ["Source", "open_source"]

logger = logging.getLogger(__name__)
AUTOTUNE = tf.data.AUTOTUNE


@dataclasses.dataclass(frozen=True)
class Source:
    """Utterance lengths up front, and a factory of the element dataset."""

    path: Path
    ids: np.ndarray  # str [n]
    frames: np.ndarray  # int [n]
    tokens: np.ndarray  # int [n]
    speakers: np.ndarray  # int [n] speaker index
    num_speakers: int
    order: np.ndarray  # int [n]: cost rank of loading an utterance alone (its shard)
    n_mels: int
    audio: MelConfig  # the recipe the features were (or are) computed with
    elements: Callable[[], tf.data.Dataset]
    # Utterances by index: {"mel": float32 [F, M], "tokens": int32 [T]} each (and
    # "audio" float32 [S] for a cache opened `with_audio`).
    load: Callable[[np.ndarray], list[dict[str, np.ndarray]]]
    tokenizer: Tokenizer  # the one the token ids come from
    skipped: tuple[Skipped, ...] = ()


def open_source(
    source, config: DataConfig, audio: MelConfig | None, *, with_audio: bool = False
) -> Source:
    """A `Source` for a cache folder, an opened `FeatureCache`, or a WAV corpus.

    Args:
        source: the cache or corpus.
        config: the caller's settings, checked against the cache's.
        audio: the mel recipe (None: the cache's); required for a corpus.
        with_audio: elements with `audio` too: a cache built with `data.keep_audio`
            (whatever `config.keep_audio` says), never a corpus.

    Raises:
        CacheError: other settings than requested; with `with_audio`, no waveforms.
        ConfigError: with `with_audio`, or without `audio`, a source that is no cache.
    """
    wanted = dataclasses.replace(config, keep_audio=True) if with_audio else config
    if isinstance(source, FeatureCache):  # opened earlier: the check `open` makes on a path
        source.check_settings(audio=audio, data=wanted)
        return _cache_source(source, config, with_audio)
    path = Path(source)
    if FeatureCache.is_cache(path):
        return _cache_source(FeatureCache.open(path, audio=audio, data=wanted), config, with_audio)
    if with_audio:
        raise ConfigError(
            f"{path} is not a feature cache (no manifest.json); waveform segments are read "
            f"from a cache only: build one with `xtts-data prepare CORPUS --out CACHE --set "
            f"data.keep_audio=true`"
        )
    if audio is None:
        raise ConfigError(
            f"{path} is not a feature cache (no manifest.json); to read a corpus on the fly, "
            f"pass audio=MelConfig(...), or build a cache with `xtts-data prepare`"
        )
    return _corpus_source(read_corpus(path), config, audio)


def _cache_source(cache: FeatureCache, config: DataConfig, with_audio: bool) -> Source:
    samples = cache.manifest.samples
    files = [str(p) for p in cache.shard_paths]
    missing = [p for p in cache.shard_paths if not p.is_file()]
    if missing:
        raise CacheError(
            f"{cache.path}: shard {missing[0].name} is missing; run `xtts-data verify`"
        )
    n_mels = cache.audio.n_mels

    def elements() -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices(files)
        if config.shuffle_buffer:
            ds = ds.shuffle(len(files), seed=config.seed)
        ds = ds.interleave(
            lambda f: tf.data.TFRecordDataset(f, buffer_size=1 << 22),
            cycle_length=min(len(files), 8),
            num_parallel_calls=AUTOTUNE,
            deterministic=config.deterministic,
        )
        return ds.map(
            lambda r: _fields(record.decode(r, n_mels), with_audio),
            num_parallel_calls=AUTOTUNE,
            deterministic=config.deterministic,
        )

    kept = ("mel", "tokens", "audio") if with_audio else ("mel", "tokens")

    def load(indices: np.ndarray) -> list[dict[str, np.ndarray]]:
        first = np.searchsorted(samples.shard, np.arange(len(files)))  # shard's first sample
        found = {}
        for shard in np.unique(samples.shard[indices]):
            wanted = {int(i - first[shard]): int(i) for i in indices if samples.shard[i] == shard}
            for position, raw in enumerate(tf.data.TFRecordDataset(files[shard])):
                if position in wanted:
                    fields = record.decode(raw, n_mels)
                    found[wanted[position]] = {k: fields[k].numpy() for k in kept}
                if len(found) == len(indices) or position >= max(wanted):
                    break
        return [found[int(i)] for i in indices]

    return Source(
        cache.path, samples.id, samples.frames, samples.tokens, samples.speaker,
        len(cache.speakers), samples.shard, n_mels, cache.audio, elements, load,
        cache.tokenizer,
    )  # fmt: skip


def _fields(fields: dict[str, tf.Tensor], with_audio: bool) -> dict[str, tf.Tensor]:
    """A decoded record's fields, `audio` left out unless asked for (an element that
    carries it costs its size in every buffer, and in RAM with `keep_in_memory`)."""
    return fields if with_audio else {k: v for k, v in fields.items() if k != "audio"}


def _corpus_source(corpus: Corpus, config: DataConfig, audio: MelConfig) -> Source:
    # Lengths come from the WAV headers, before trimming: an upper bound of each trimmed
    # utterance's frames (which the decoded element carries), so every utterance fits the
    # shapes planned from them, with more padding than a cache's exact lengths give.
    transcripts = read_transcripts(corpus.rows, config.text)
    speakers = {name: i for i, name in enumerate(corpus.speakers)}
    rows, skipped = [], list(corpus.skipped) + list(transcripts.skipped)
    for row in corpus.rows:
        if row.id not in transcripts.tokens:
            continue
        info = _wav_info(row.audio)
        if not isinstance(info, str):
            info = config.too_long(info[1] / info[0]) or info  # (rate, samples)
        if isinstance(info, str):
            skipped.append(Skipped(row.id, info))
            continue
        rows.append((row, info, transcripts.tokens[row.id]))
    for s in skipped:
        logger.warning("skipped %s: %s", s.id, s.reason)
    if not rows:
        raise CorpusError(f"{corpus.root}: no usable WAV rows ({len(skipped)} skipped)")
    rates = sorted({rate for _, (rate, _), _ in rows})
    frames = [
        num_frames(resampled_length(n, orig_sr=rate, target_sr=audio.sample_rate), audio)
        for _, (rate, n), _ in rows
    ]
    table = {
        "split": record.split_bucket([r.id for r, _, _ in rows]),
        "path": [str(r.audio) for r, _, _ in rows],
        "speaker": np.array([speakers[r.speaker] for r, _, _ in rows], np.int32),
        "rate_index": np.array([rates.index(rate) for _, (rate, _), _ in rows], np.int32),
        "tokens": tf.ragged.constant([ids for _, _, ids in rows], tf.int32),
    }

    def decode(e):
        wave, _ = decode_wav(tf.io.read_file(e["path"]))
        wave = to_mono(wave)
        branches = [
            lambda r=r: resample(wave, orig_sr=r, target_sr=audio.sample_rate) for r in rates
        ]
        wave = tf.switch_case(e["rate_index"], branches) if len(rates) > 1 else branches[0]()
        if config.trim_top_db is not None:  # as `prepare` does, after resampling
            wave = trim_silence(wave, top_db=config.trim_top_db)
        mel = mel_features(wave, audio)
        return {
            "split": e["split"],
            "speaker": e["speaker"],
            "tokens": e["tokens"],
            "mel": mel,
            "frames": tf.shape(mel)[0],
        }

    def elements() -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices(table)
        if config.shuffle_buffer:
            ds = ds.shuffle(len(rows), seed=config.seed)
        return ds.map(decode, num_parallel_calls=AUTOTUNE, deterministic=config.deterministic)

    def load(indices: np.ndarray) -> list[dict[str, np.ndarray]]:
        return [
            {"mel": mel_features(load_audio(rows[i][0].audio, audio,
                                            trim_top_db=config.trim_top_db), audio).numpy(),
             "tokens": np.asarray(rows[i][2], np.int32)}
            for i in indices
        ]  # fmt: skip

    return Source(
        corpus.root,
        np.array([r.id for r, _, _ in rows], object),
        np.array(frames),
        np.array([len(ids) for _, _, ids in rows]),
        table["speaker"],
        len(speakers),
        np.zeros(len(rows), np.int64),
        audio.n_mels,
        audio,
        elements,
        load,
        transcripts.tokenizer,
        tuple(skipped),
    )


def _wav_info(path: Path) -> tuple[int, int] | str:
    """(sample rate, samples) from the WAV header, or why the file cannot be used."""
    with open(path, "rb") as file:
        head = file.read(12)
    if head[:4] not in (b"RIFF", b"RF64") or head[8:12] != b"WAVE":
        raise CorpusError(
            f"{path}: the on-the-fly pipeline reads WAV files only; build a feature cache "
            f"with `xtts-data prepare` (it reads FLAC and OGG through soundfile)"
        )
    try:
        info = soundfile.info(str(path))
    except (soundfile.LibsndfileError, RuntimeError) as error:
        return f"unreadable WAV: {error}"
    if info.frames == 0:
        return "no audio samples"
    return info.samplerate, info.frames
