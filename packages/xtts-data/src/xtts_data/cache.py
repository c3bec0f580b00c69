"""`prepare`: turn a corpus into a verified, sharded feature cache, once.

Rows are assigned to shards by a hash of their id (so every shard mixes lengths and
speakers), shards are built in parallel threads (audio decoding, resampling and the
compiled mel all release the GIL), and each shard is written to a temp file, synced and
renamed, then described by a sidecar. A killed build resumes from the shards whose
sidecar exists; the result is byte-identical to an uninterrupted build.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
import tqdm

from xtts_audio import MelConfig
from xtts_data import record
from xtts_data._audio_io import BadAudioError, load_audio
from xtts_data._features import MelExtractor
from xtts_data._transcripts import Transcripts, read_transcripts
from xtts_data.config import DataConfig
from xtts_data.corpus import Corpus, Row, Skipped, read_corpus
from xtts_data.errors import CacheError, CorpusError
from xtts_data.files import LOCK_NAME, folder_lock, remove_stale_temp_files, write_json_atomic
from xtts_data.manifest import (
    MANIFEST,
    CacheSettings,
    Counts,
    Integrity,
    Manifest,
    SampleTable,
    ShardEntry,
    canonical_json,
    read_json,
    settings_hash,
    settings_of,
    sha256_file,
)
from xtts_data.text import Tokenizer

__all__ = ["PrepareResult", "format_summary", "prepare"]

logger = logging.getLogger(__name__)
_CHUNK = 32  # utterances per unit of parallel work


@dataclasses.dataclass(frozen=True)
class PrepareResult:
    """What `prepare` built (timings are printed, never written into the cache)."""

    path: Path
    ok: int
    skipped: tuple[Skipped, ...]
    speakers: int
    shards: int
    resumed_shards: int
    audio_seconds: float
    wall_seconds: float
    oov: dict[str, int]
    built_seconds: float = 0.0  # audio seconds computed by this run (not resumed)
    dropped: dict[str, int] = dataclasses.field(default_factory=dict)  # removed by cleaning
    languages: dict[str, int] = dataclasses.field(default_factory=dict)  # utterances each
    text_rows_per_second: float = 0.0  # cleaning + tokenising speed
    outliers: tuple[dict, ...] = ()  # {"id", "seconds"} far outside the length distribution


@dataclasses.dataclass(frozen=True)
class _Build:
    """Everything a shard worker needs (shared, read-only)."""

    out: Path
    audio: MelConfig
    data: DataConfig
    transcripts: Transcripts
    speakers: dict[str, int]
    extractor: MelExtractor
    num_shards: int

    @property
    def tokenizer(self) -> Tokenizer:
        return self.transcripts.tokenizer

    def language_index(self, row_id: str) -> int:
        """Index of a row's language in the tokenizer's (and manifest's) languages."""
        return self.tokenizer.languages.index(self.transcripts.languages[row_id])

    def shard_file(self, index: int) -> str:
        return f"shard-{index:05d}-of-{self.num_shards:05d}.tfrecord"


def prepare(
    corpus: str | Path | Corpus,
    out: str | Path,
    *,
    audio: MelConfig,
    data: DataConfig,
    workers: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
) -> PrepareResult:
    """Build (or finish building) the feature cache of `corpus` in `out`.

    Args:
        corpus: a corpus path (any layout `read_corpus` detects) or a read `Corpus`.
        out: the cache folder; created if needed.
        audio: the mel recipe.
        data: text and cache settings.
        workers: threads computing features (default: one per CPU core).
        overwrite: delete a cache built with other settings or rows instead of failing.
        progress: show a progress bar.

    Raises:
        CorpusError: the corpus has no usable rows.
        CacheError: `out` holds a cache or build of other settings or rows (and not
            `overwrite`).
        LockError: another process is building into `out`.
        CacheError: writing failed (e.g. a full disk); complete shards are kept, no
            partial file is left, and the same call resumes.
    """
    with folder_lock(Path(out), purpose="xtts-data prepare"):
        try:
            return _prepare(corpus, Path(out), audio=audio, data=data, workers=workers,
                            overwrite=overwrite, progress=progress)  # fmt: skip
        except (OSError, tf.errors.OpError) as error:  # e.g. a full disk
            reason = getattr(error, "strerror", None) or getattr(error, "message", str(error))
            raise CacheError(
                f"{out}: cannot write the cache ({reason}); the complete shards are kept: "
                f"free space and run the same command again to resume"
            ) from None


def _prepare(corpus, out: Path, *, audio: MelConfig, data: DataConfig, workers: int | None,
             overwrite: bool, progress: bool) -> PrepareResult:  # fmt: skip
    """`prepare` once `out` is this process's."""
    started = time.perf_counter()
    corpus = corpus if isinstance(corpus, Corpus) else read_corpus(corpus)
    if not corpus.rows:
        reasons = "; ".join(f"{s.id}: {s.reason}" for s in corpus.skipped[:3])
        raise CorpusError(
            f"{corpus.root}: no usable rows ({len(corpus.skipped)} skipped: {reasons})"
        )
    out = Path(out)
    transcripts = read_transcripts(corpus.rows, data.text)
    corpus = dataclasses.replace(
        corpus,
        rows=tuple(row for row in corpus.rows if row.id in transcripts.tokens),
        skipped=corpus.skipped + transcripts.skipped,
    )
    shards = _plan(corpus.rows, data.shard_size)
    build = _Build(
        out,
        audio,
        data,
        transcripts,
        {name: i for i, name in enumerate(corpus.speakers)},
        _extractor(audio),
        len(shards),
    )
    _start(build, corpus, overwrite)
    pending = [i for i in range(len(shards)) if _sidecar(build, i) is None]
    if len(pending) < len(shards):
        logger.info(
            "%s: %d of %d shards complete from an earlier run",
            out,
            len(shards) - len(pending),
            len(shards),
        )
    # Work is spread in chunks, not whole shards, so every core stays busy to the end;
    # shards are written in order as their last chunk arrives.
    chunks = [
        (i, shards[i][j : j + _CHUNK]) for i in pending for j in range(0, len(shards[i]), _CHUNK)
    ]
    with (
        tqdm.tqdm(
            total=sum(len(shards[i]) for i in pending),
            unit="utt",
            disable=not progress,
            desc="prepare",
        ) as bar,
        concurrent.futures.ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool,
    ):
        parts: list[_Chunk] = []
        for (index, _), part in zip(
            chunks, pool.map(lambda c: _compute(build, c[1], bar), chunks), strict=False
        ):
            parts.append(part)
            if sum(len(p.rows) for p in parts) == len(shards[index]):
                _write_shard(build, index, parts)
                parts = []
    sidecars = [_sidecar(build, i) for i in range(len(shards))]
    result = _finish(build, corpus, sidecars)
    built = sum(s["seconds"] for i in pending for s in sidecars[i]["samples"])
    return dataclasses.replace(
        result,
        resumed_shards=len(shards) - len(pending),
        built_seconds=built,
        wall_seconds=time.perf_counter() - started,
    )


@functools.lru_cache(maxsize=4)
def _extractor(audio: MelConfig) -> MelExtractor:
    """One compiled extractor per recipe and process (XLA compiles once, not per build)."""
    return MelExtractor(audio)


def _plan(rows: Sequence[Row], shard_size: int) -> list[list[Row]]:
    order = sorted(rows, key=lambda row: hashlib.sha1(row.id.encode()).hexdigest())
    return [order[i : i + shard_size] for i in range(0, len(order), shard_size)]


def _build_record(build: _Build, corpus: Corpus) -> dict:
    settings = settings_of(build.audio, build.data)
    rows = [(r.id, os.path.relpath(r.audio, corpus.root), r.text, r.speaker, r.language)
            for r in corpus.rows]  # fmt: skip
    return {
        "settings_hash": settings_hash(settings),
        "settings": settings,
        "shard_size": build.data.shard_size,
        "rows_sha256": hashlib.sha256(canonical_json(rows).encode()).hexdigest(),
    }


def _start(build: _Build, corpus: Corpus, overwrite: bool) -> None:
    """Create `out`, or check an existing build there is this build (resume)."""
    record = _build_record(build, corpus)
    path = build.out / "build.json"
    # Temp files of a killed build, first: one killed writing build.json left only that.
    for folder in (build.out, build.out / "shards"):
        if folder.is_dir():
            remove_stale_temp_files(folder)
    if path.exists() and read_json(path) != record:
        if not overwrite:
            raise CacheError(
                f"{build.out} holds a cache built with other settings or corpus rows; pass "
                f"--overwrite to replace it, or choose another --out folder"
            )
        for child in build.out.iterdir():  # all but the lock this process holds
            if child.name != LOCK_NAME:
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    elif not path.exists() and any(p.name != LOCK_NAME for p in build.out.iterdir()):
        raise CacheError(
            f"{build.out} is not empty and holds no xtts-data cache; choose another --out"
        )
    if not path.exists():  # first: a folder holding it is this build's, whatever follows
        write_json_atomic(path, record)
    (build.out / "shards").mkdir(parents=True, exist_ok=True)


def _sidecar(build: _Build, index: int) -> dict | None:
    """The sidecar of a complete shard, or None when the shard must be (re)built."""
    sidecar = (build.out / "shards" / build.shard_file(index)).with_suffix(".json")
    if not sidecar.exists():
        return None
    info = read_json(sidecar)
    shard = build.out / "shards" / info["file"]
    return info if shard.is_file() and shard.stat().st_size == info["bytes"] else None


@dataclasses.dataclass
class _Chunk:
    """Computed rows of part of a shard."""

    rows: list[Row]
    samples: list[dict]
    skipped: list[Skipped]
    tokens: list[list[int]]
    mels: list[np.ndarray]
    waves: list[np.ndarray | None] = dataclasses.field(default_factory=list)  # keep_audio


def _compute(build: _Build, rows: list[Row], bar: tqdm.tqdm) -> _Chunk:
    chunk = _Chunk(rows, [], [], [], [])
    waves = []
    for row in rows:
        entry = _load_row(build, row)
        bar.update(1)
        if isinstance(entry, Skipped):
            chunk.skipped.append(entry)
            continue
        wave, ids = entry
        waves.append(wave)
        chunk.tokens.append(ids)
        chunk.samples.append(
            {
                "id": row.id,
                "speaker": build.speakers[row.speaker],
                "language": build.language_index(row.id),
                "tokens": len(ids),
                "seconds": len(wave) / build.audio.sample_rate,
            }
        )
    chunk.mels = build.extractor(waves)
    chunk.waves = waves if build.data.keep_audio else [None] * len(waves)
    for sample, mel in zip(chunk.samples, chunk.mels, strict=True):
        sample["frames"] = len(mel)
    return chunk


def _write_shard(build: _Build, index: int, parts: list[_Chunk]) -> None:
    """The shard file, then its sidecar: the sidecar marks the shard complete."""
    samples = [s for p in parts for s in p.samples]
    shard = build.out / "shards" / build.shard_file(index)
    _write_tfrecord(
        shard,
        samples,
        [t for p in parts for t in p.tokens],
        [m for p in parts for m in p.mels],
        [w for p in parts for w in p.waves],  # None each without keep_audio
    )
    write_json_atomic(
        shard.with_suffix(".json"),
        {
            "file": shard.name,
            "bytes": shard.stat().st_size,
            "sha256": sha256_file(shard),
            "samples": samples,
            "skipped": [dataclasses.asdict(s) for p in parts for s in p.skipped],
        },
    )


def _load_row(build: _Build, row: Row):
    """(waveform, token ids) of a row, or the reason it is skipped."""
    ids = build.transcripts.tokens[row.id]
    try:
        wave = load_audio(row.audio, build.audio, trim_top_db=build.data.trim_top_db)
    except BadAudioError as error:
        return Skipped(row.id, str(error))
    too_long = build.data.too_long(len(wave) / build.audio.sample_rate)
    return Skipped(row.id, too_long) if too_long else (wave, ids)


def _write_tfrecord(path: Path, samples: list[dict], tokens: list[list[int]], mels,
                    waves) -> None:  # fmt: skip
    buckets = record.split_bucket([s["id"] for s in samples]).numpy() if samples else []
    record.write_shard(path, (
        record.encode(sample["id"], sample["speaker"], ids, mel, int(bucket), wave)
        for sample, ids, mel, wave, bucket in zip(samples, tokens, mels, waves, buckets,
                                                  strict=True)
    ))  # fmt: skip


def _finish(build: _Build, corpus: Corpus, sidecars: list[dict]) -> PrepareResult:
    """Write tokenizer.json, report.json and, last, manifest.json."""
    samples = [dict(s, shard=i) for i, side in enumerate(sidecars) for s in side["samples"]]
    skipped = list(corpus.skipped) + [Skipped(**s) for side in sidecars for s in side["skipped"]]
    oov, dropped = build.transcripts.oov, build.transcripts.dropped
    languages = list(build.tokenizer.languages)
    counted = collections.Counter(languages[s["language"]] for s in samples)
    per_language = {tag: counted[tag] for tag in languages}
    seconds = float(sum(s["seconds"] for s in samples))
    outliers = length_outliers(samples)
    write_json_atomic(build.out / "tokenizer.json", build.tokenizer.to_dict())
    write_json_atomic(
        build.out / "report.json",
        {
            "ok": len(samples),
            "skipped": [dataclasses.asdict(s) for s in skipped],
            "oov": dict(sorted(oov.items())),
            "dropped": dict(sorted(dropped.items())),
            "languages": per_language,
            "outliers": outliers,
            "audio_seconds": round(seconds, 3),
        },
    )
    counts = Counts(ok=len(samples), skipped=len(skipped), shards=len(sidecars),
                    frames=int(sum(s["frames"] for s in samples)),
                    audio_seconds=round(seconds, 3), languages=per_language)  # fmt: skip
    write_json_atomic(build.out / MANIFEST, _manifest(build, samples, sidecars, counts).to_json())
    return PrepareResult(
        build.out,
        len(samples),
        tuple(skipped),
        len(build.speakers),
        len(sidecars),
        0,
        seconds,
        0.0,
        dict(oov),
        dropped=dict(dropped),
        languages=per_language,
        text_rows_per_second=build.transcripts.rows_per_second,
        outliers=tuple(outliers),
    )


def _manifest(build: _Build, samples: list[dict], sidecars: list[dict], counts: Counts) -> Manifest:
    """The manifest of a finished build, once tokenizer.json is written."""
    settings = settings_of(build.audio, build.data)
    table = {c: [s[c] for s in samples] for c in ("id", "speaker", "language", "frames",
                                                   "tokens", "shard")}  # fmt: skip
    shards = [ShardEntry(file=side["file"], bytes=side["bytes"], sha256=side["sha256"],
                         samples=len(side["samples"])) for side in sidecars]  # fmt: skip
    return Manifest(
        settings=CacheSettings(**settings),
        settings_hash=settings_hash(settings),
        speakers=tuple(build.speakers),
        languages=tuple(build.tokenizer.languages),
        num_mels=build.audio.n_mels,
        counts=counts,
        samples=SampleTable.from_json(table),
        integrity=Integrity.of(table, (build.out / "tokenizer.json").read_bytes()),
        shards=tuple(shards),
    )


def length_outliers(samples: list[dict], *, fences: float = 3.0) -> list[dict]:
    """Utterances far outside the corpus's length distribution: beyond `fences`
    interquartile ranges from the quartiles (Tukey's far-out values), longest first."""
    if len(samples) < 8:
        return []  # too few to tell a distribution from its tails
    lengths = np.array([s["seconds"] for s in samples])
    q1, q3 = np.percentile(lengths, [25, 75])
    low, high = q1 - fences * (q3 - q1), q3 + fences * (q3 - q1)
    far = [s for s in samples if not low <= s["seconds"] <= high]
    return [{"id": s["id"], "seconds": round(s["seconds"], 2)}
            for s in sorted(far, key=lambda s: -s["seconds"])]  # fmt: skip


def _counted(counts: dict[str, int], most: int = 8) -> str:
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:most]
    return f"{sum(counts.values())} character(s): " + ", ".join(f"{c!r} x{n}" for c, n in top)


def format_summary(result: PrepareResult, *, max_skipped: int = 10) -> str:
    """A one-screen summary of a `prepare` run."""
    hours = result.audio_seconds / 3600
    lines = [
        f"cache      {result.path}",
        f"utterances {result.ok} ok, {len(result.skipped)} skipped "
        f"({hours:.2f} h of audio, {result.speakers} speaker(s), {result.shards} shard(s)"
        + (f", {result.resumed_shards} from an earlier run)" if result.resumed_shards else ")"),
        f"speed      {result.built_seconds / max(result.wall_seconds, 1e-9):.0f} s of audio per "
        f"second ({result.built_seconds / 3600:.2f} h computed in {result.wall_seconds:.1f} s)",
    ]
    if result.languages:
        lines.append("languages  " + ", ".join(f"{t} {n}" for t, n in result.languages.items()))
    lines.append(f"text       {result.text_rows_per_second:,.0f} rows/s cleaned and tokenised")
    if result.dropped:
        lines.append(f'cleaning   {_counted(result.dropped)} removed (report.json "dropped")')
    if result.oov:
        lines.append(f"unknown    {_counted(result.oov)} not in the symbol table, dropped")
    if result.outliers:
        shown = ", ".join(f"{o['id']} {o['seconds']:.1f} s" for o in result.outliers[:4])
        lines.append(f"outliers   {len(result.outliers)} utterance(s) far from the corpus's "
                     f"lengths, kept (report.json \"outliers\"): {shown}")  # fmt: skip
    reasons = collections.Counter(s.reason.split(":")[0] for s in result.skipped)
    for reason, count in reasons.most_common():
        lines.append(f"skipped    {count:>5} x {reason}")
    for s in result.skipped[:max_skipped]:
        lines.append(f"  {s.id}: {s.reason}")
    if len(result.skipped) > max_skipped:
        lines.append(
            f"  ... {len(result.skipped) - max_skipped} more in {result.path / 'report.json'}"
        )
    return "\n".join(lines)
