"""`xtts-data verify`: every byte of a feature cache against its manifest.

Opening a cache (`FeatureCache.open`) checks the manifest, its settings and the
tokenizer; this reads every shard and record as well, so it takes as long as a pass over
the data.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from xtts_audio import MelConfig, num_frames
from xtts_data import record
from xtts_data.errors import CacheError
from xtts_data.manifest import Manifest, check_manifest, sha256_file

__all__ = ["verify_cache"]


def verify_cache(path: str | Path) -> list[str]:
    """Check the cache at `path`: the manifest against its settings hash, its checksums
    and tokenizer.json; every shard against its size and sha256 (waveforms included);
    every record against the manifest's id, frames, tokens and speaker for it, its size
    against its header, and its waveform's length against its frames (none without
    `data.keep_audio`).

    Returns:
        One message per problem, naming the file or sample; empty when the cache is intact.
    """
    path = Path(path)
    try:
        manifest = Manifest.read(path)
        check_manifest(path, manifest)
    except (CacheError, KeyError, TypeError) as error:  # KeyError, TypeError: build.json
        return [f"manifest: {error}"]
    problems = []
    for shard in manifest.shards:
        file = path / "shards" / shard.file
        if not file.is_file():
            problems.append(f"{shard.file}: missing")
        elif file.stat().st_size != shard.bytes:
            problems.append(f"{shard.file}: {file.stat().st_size} bytes, expected {shard.bytes}")
        elif sha256_file(file) != shard.sha256:
            problems.append(f"{shard.file}: checksum mismatch (file changed or damaged)")
    for name in ("tokenizer.json", "report.json"):
        if not (path / name).is_file():
            problems.append(f"{name}: missing")
    return problems or _verify_records(path, manifest)


def _verify_records(path: Path, manifest: Manifest) -> list[str]:
    """Each record's header and id against the manifest's row for it, in order."""
    samples, problems = manifest.samples, []
    audio = MelConfig.from_dict(manifest.settings.audio)
    keeps_audio = bool(manifest.settings.data.get("keep_audio", False))
    rows = iter(range(len(samples)))
    for shard in manifest.shards:
        for position, raw in enumerate(tf.data.TFRecordDataset(str(path / "shards" / shard.file))):
            header = record.read_header(raw.numpy(), manifest.num_mels)
            where = f"{shard.file} record {position}"
            index = next(rows, None)
            if isinstance(header, str):
                problems.append(f"{where}: {header}")
                continue
            if index is None:
                problems.append(f"{where} ({header['id']}): not in the manifest")
                continue
            wanted = {"id": samples.id[index], "frames": int(samples.frames[index]),
                      "tokens": int(samples.tokens[index]),
                      "speaker": int(samples.speaker[index])}  # fmt: skip
            for key, value in wanted.items():
                if header[key] != value:
                    problems.append(f"{where} ({wanted['id']}): manifest says {key} {value!r}, "
                                    f"the record holds {header[key]!r}")  # fmt: skip
            found = num_frames(header["samples"], audio) if header["samples"] else 0
            expected = header["frames"] if keeps_audio else 0  # frames of the waveform
            if found != expected:
                problems.append(f"{where} ({wanted['id']}): {header['samples']} waveform "
                                f"samples give {found} frames, expected {expected} "
                                f"(keep_audio={keeps_audio})")  # fmt: skip
    left = sum(1 for _ in rows)
    if left:
        problems.append(f"{left} sample(s) of the manifest have no record")
    return problems
