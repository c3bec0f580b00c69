"""`derive_mels`: a copy of a feature cache whose mels are other frames of the same length
(a text-to-mel model's teacher-forced frames, to fine-tune a vocoder on), every other byte
kept: ids, tokens, speakers, split buckets and waveforms.

Each record keeps its layout (`xtts_data.record`): only its mel words are replaced, so a
frame `i` still sits over samples `i * hop_length` of the same waveform. Shards are
rewritten one at a time, to a temp file that is synced and renamed, then described by a
sidecar: a killed run resumes from the shards whose sidecar exists, and ends byte-identical
to an uninterrupted one. `derived.json`, written first, names the source cache and where
the frames come from (`origin`): a run into a folder holding other frames is refused.
manifest.json is written last (the source's, with the new shards' sizes and checksums), so
`xtts-data verify` checks the copy as any cache, and every reader opens it as one.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tqdm

from xtts_data import record
from xtts_data.errors import CacheError
from xtts_data.files import folder_lock, remove_stale_temp_files, write_json_atomic
from xtts_data.manifest import (
    MANIFEST,
    Manifest,
    ShardEntry,
    check_manifest,
    read_json,
    sha256_file,
)
from xtts_data.text import Tokenizer
from xtts_data.utterances import Utterance

__all__ = ["DERIVED", "derive_mels"]

DERIVED = "derived.json"

# The source's utterances (`audio` as the cache holds it: None without `data.keep_audio`)
# → float32 [F, n_mels] frames each.
Frames = Callable[[Sequence[Utterance]], Sequence[np.ndarray]]


def derive_mels(source: str | Path, out: str | Path, frames_of: Frames, *,
                origin: Mapping[str, Any], batch: int = 32,
                progress: bool = True) -> Path:  # fmt: skip
    """Write the cache `source` to `out` with each mel replaced by `frames_of`'s.

    Args:
        source: a feature cache folder (`xtts-data prepare`).
        out: the folder to write (created; resumed where a killed run stopped).
        frames_of: `xtts_data.Utterance`s of the source, in its order → float32
            [F, n_mels] frames each: their mels' shapes, finite.
        origin: JSON-able: where the frames come from (written to `derived.json`, and
            compared on resume).
        batch: utterances per `frames_of` call.
        progress: a tqdm bar of the utterances.

    Returns:
        `out`.

    Raises:
        CacheError: `source` is not a complete cache, `out` holds frames of another origin
            or source, a damaged source record, or frames of another shape or not finite.
    """
    source, out = Path(source), Path(out)
    manifest = Manifest.read(source)
    tokenizer = check_manifest(source, manifest)
    claim = {"source": str(source.resolve()),
             "source_manifest_sha256": sha256_file(source / MANIFEST),
             "origin": dict(origin)}  # fmt: skip
    with folder_lock(out, purpose="derive frames"):
        _claim(out, claim)
        if (out / MANIFEST).exists():
            return out  # complete: derived from this very source and origin
        (out / "shards").mkdir(exist_ok=True)
        remove_stale_temp_files(out / "shards")
        shards = []
        with tqdm.tqdm(total=manifest.counts.ok, unit="utt", desc="frames",
                       disable=not progress) as bar:  # fmt: skip
            for entry in manifest.shards:
                reader = _Reader(manifest.num_mels, tokenizer, frames_of, batch)
                shards.append(_shard(source, out, entry, reader, bar))
        for name in ("tokenizer.json", "report.json"):
            shutil.copyfile(source / name, out / name)
        derived = dataclasses.replace(manifest, shards=tuple(shards))
        write_json_atomic(out / MANIFEST, derived.to_json())
    return out


def _claim(out: Path, claim: dict) -> None:
    """Write `derived.json`, or check that the one there says the same."""
    path = out / DERIVED
    if not path.exists():
        write_json_atomic(path, claim)
        return
    found = read_json(path)
    if found != claim:
        raise CacheError(
            f"{out} holds frames of {found.get('origin')} from {found.get('source')}, not of "
            f"{claim['origin']} from {claim['source']}; write to another folder or delete it"
        )


@dataclasses.dataclass(frozen=True)
class _Reader:
    """How a shard's records are read and given their frames."""

    n_mels: int
    tokenizer: Tokenizer
    frames_of: Frames
    batch: int

    def utterance(self, raw: bytes) -> Utterance:
        header = record.read_header(raw, self.n_mels)
        if isinstance(header, str):
            raise CacheError(f"a damaged record: {header}")
        words = np.frombuffer(raw, "<i4")
        tokens_end = record.HEADER_WORDS + header["tokens"]
        mel_end = tokens_end + header["frames"] * self.n_mels
        tokens = words[record.HEADER_WORDS : tokens_end].astype(np.int32)
        pcm = np.frombuffer(raw[4 * mel_end :], "<i2")[: header["samples"]]
        return Utterance(
            id=str(header["id"]), speaker=int(header["speaker"]), tokens=tokens,
            mel=words[tokens_end:mel_end].view("<f4").reshape(header["frames"], self.n_mels),
            text=self.tokenizer.decode(tokens),
            audio=pcm.astype(np.float32) / 32768.0 if header["samples"] else None,
        )  # fmt: skip


def _shard(source: Path, out: Path, entry: ShardEntry, reader: _Reader,
           bar: tqdm.tqdm) -> ShardEntry:  # fmt: skip
    """The shard `entry` rewritten (or, with its sidecar there, as already written)."""
    path = out / "shards" / entry.file
    sidecar = path.with_suffix(".json")
    if sidecar.exists():
        bar.update(entry.samples)
        return ShardEntry(**read_json(sidecar))
    raws = _records(source / "shards" / entry.file)
    written = []
    for start in range(0, len(raws), reader.batch):
        chunk = raws[start : start + reader.batch]
        utterances = [reader.utterance(raw) for raw in chunk]
        mels = list(reader.frames_of(utterances))
        for utterance, raw, mel in zip(utterances, chunk, mels, strict=True):
            written.append(record.with_mel(raw, _checked(utterance, mel), reader.n_mels))
        bar.update(len(chunk))
    record.write_shard(path, written)
    derived = ShardEntry(file=entry.file, bytes=path.stat().st_size, sha256=sha256_file(path),
                         samples=len(written))  # fmt: skip
    write_json_atomic(sidecar, dataclasses.asdict(derived))
    return derived


def _records(path: Path) -> list[bytes]:
    try:
        return [bytes(raw.numpy()) for raw in tf.data.TFRecordDataset(str(path))]
    except tf.errors.OpError as error:
        raise CacheError(f"{path}: a damaged record ({error.message}); rebuild the source "
                         f"cache or check it with `xtts-data verify`") from None  # fmt: skip


def _checked(utterance: Utterance, mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, np.float32)
    if mel.shape != utterance.mel.shape or not np.isfinite(mel).all():
        raise CacheError(
            f"Expected finite frames of shape {utterance.mel.shape} for {utterance.id!r} (its "
            f"mel's), received: shape={mel.shape}, finite={bool(np.isfinite(mel).all())}"
        )
    return mel
