"""The feature cache on disk: layout, settings hash, manifest, and integrity checks.

```
CACHE/
  build.json              settings + plan of the build (written first; resume checks it)
  shards/shard-00000-of-00012.tfrecord   one record per utterance: raw little-endian
                          words (header, token ids, mel, id), not a tf.train.Example;
                          layout in `xtts_data.record`
  shards/shard-00000-of-00012.json       per-shard sidecar (samples, skips, sha256)
  tokenizer.json          symbol table (and languages) of the character tokenizer
  report.json             {"ok": n, "skipped": [{"id", "reason"}], "dropped": {char: n},
                          "oov": {char: n}, "languages": {tag: n}, ...}
  manifest.json           written last: settings hash, speakers, languages, per-sample
                          lengths, shard checksums, counts
```
Every file appears complete or not at all (temp file + rename).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from xtts_audio import MelConfig
from xtts_data import record
from xtts_data.config import DataConfig
from xtts_data.errors import CacheError
from xtts_data.text import Tokenizer

__all__ = ["FORMAT_VERSION", "FeatureCache", "settings_hash", "settings_of", "verify_cache"]

FORMAT_VERSION = 4  # 2: raw little-endian records (xtts_data.record); 3: languages; 4: integrity


def settings_of(audio: MelConfig, data: DataConfig) -> dict[str, Any]:
    """Everything that changes the cached features (the settings hash covers exactly this)."""
    return {"format": FORMAT_VERSION, "audio": audio.to_dict(), "data": data.cache_settings()}


def settings_hash(settings: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of `settings`."""
    return hashlib.sha256(canonical_json(settings).encode()).hexdigest()


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CacheError(f"{path.parent}: missing {path.name}") from None
    except (OSError, ValueError) as error:
        raise CacheError(f"{path}: unreadable ({error})") from None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class FeatureCache:
    """An opened, complete feature cache (`xtts-data prepare` output).

    Attributes:
        path: the cache folder.
        manifest: the parsed manifest.json.
        audio: the mel recipe the features were computed with.
        tokenizer: the tokenizer the token ids come from.
    """

    path: Path
    manifest: dict[str, Any]
    audio: MelConfig
    tokenizer: Tokenizer

    @classmethod
    def open(
        cls, path: str | Path, *, audio: MelConfig | None = None, data: DataConfig | None = None
    ) -> FeatureCache:
        """Open the cache at `path`, checking it was built with the requested settings.

        Args:
            path: the cache folder.
            audio, data: the settings the caller wants; when given, a cache built with
                other feature settings is an error instead of silently mixed features.

        Raises:
            CacheError: not a complete cache, or built with other settings.
        """
        path = Path(path)
        manifest = read_json(path / "manifest.json")
        if manifest.get("format") != FORMAT_VERSION:
            raise CacheError(
                f"{path}: cache format {manifest.get('format')!r}, this xtts-data reads "
                f"format {FORMAT_VERSION}; rebuild it with `xtts-data prepare`"
            )
        check_manifest(path, manifest)
        _check_settings(path, manifest["settings"], audio=audio, data=data)
        tokenizer = Tokenizer.from_dict(read_json(path / "tokenizer.json"))
        if list(tokenizer.languages) != manifest["languages"]:
            raise CacheError(
                f"{path}: tokenizer.json's languages {list(tokenizer.languages)} disagree with "
                f"the manifest's {manifest['languages']}; rebuild it with `xtts-data prepare`"
            )
        return cls(path, manifest, MelConfig.from_dict(manifest["settings"]["audio"]), tokenizer)

    def check_settings(
        self, *, audio: MelConfig | None = None, data: DataConfig | None = None
    ) -> None:
        """The check `open` makes, for a cache opened earlier: `audio` and `data` (those
        given) must be the settings the cache was built with.

        Raises:
            CacheError: naming each differing field (`audio.n_mels: cache has 80,
                requested 64`).
        """
        _check_settings(self.path, self.manifest["settings"], audio=audio, data=data)

    @property
    def languages(self) -> list[str]:
        """Language tags of the corpus; a sample's `language` is an index into this list."""
        return list(self.manifest["languages"])

    @property
    def speakers(self) -> list[str]:
        """Speaker names; a sample's `speaker` is an index into this list."""
        return list(self.manifest["speakers"])

    @property
    def shard_paths(self) -> list[Path]:
        return [self.path / "shards" / s["file"] for s in self.manifest["shards"]]

    def samples(self) -> dict[str, np.ndarray]:
        """Per-sample columns: `id` (str), `speaker`, `language`, `frames`, `tokens`,
        `shard` (int)."""
        columns = self.manifest["samples"]
        return {
            "id": np.array(columns["id"], dtype=object),
            **{
                k: np.asarray(columns[k], np.int64)
                for k in ("speaker", "language", "frames", "tokens", "shard")
            },
        }


def integrity(samples: dict[str, list], tokenizer_json: bytes) -> dict[str, str]:
    """Checksums of the manifest's per-sample table and of tokenizer.json, as the build
    wrote them: any later edit of either is found at open."""
    return {
        "samples_sha256": hashlib.sha256(canonical_json(samples).encode()).hexdigest(),
        "tokenizer_sha256": hashlib.sha256(tokenizer_json).hexdigest(),
    }


def _fail(path: Path, what: str) -> None:
    raise CacheError(f"{path}: {what}; rebuild it with `xtts-data prepare --overwrite`")


def check_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """The manifest agrees with itself, with the build's settings and with tokenizer.json.

    Raises:
        CacheError: naming what disagrees (settings edited after the build, the per-sample
            table or tokenizer.json changed, an index outside its list).
    """
    settings = manifest["settings"]
    if settings_hash(settings) != manifest["settings_hash"]:
        built = path / "build.json"
        labels = ("built with", "manifest says")
        diffs = (_differences(read_json(built)["settings"], settings, labels=labels)
                 if built.exists() else [])  # fmt: skip
        named = "; ".join(diffs[:5]) or "no build.json to compare with"
        _fail(path, f"manifest.json's settings were changed after the build ({named})")
    samples, checks = manifest["samples"], manifest["integrity"]
    lengths = {name: len(column) for name, column in samples.items()}
    if set(lengths.values()) != {manifest["counts"]["ok"]}:
        _fail(path, f"manifest.json's per-sample columns have lengths {lengths}, expected "
                    f"{manifest['counts']['ok']} each")  # fmt: skip
    tokenizer = path / "tokenizer.json"
    found = integrity(samples, tokenizer.read_bytes() if tokenizer.exists() else b"")
    if found["samples_sha256"] != checks["samples_sha256"]:
        _fail(path, "manifest.json's per-sample table (ids, frames, tokens, speakers, "
                    "shards) was changed after the build (checksum mismatch)")  # fmt: skip
    if found["tokenizer_sha256"] != checks["tokenizer_sha256"]:
        _fail(path, "tokenizer.json is missing or differs from the one the cache was built with")
    for column, names in (("speaker", "speakers"), ("language", "languages")):
        if samples[column] and max(samples[column]) >= len(manifest[names]):
            _fail(path, f"a sample's {column} index {max(samples[column])} is outside the "
                        f"manifest's {len(manifest[names])} {names}")  # fmt: skip


def _check_settings(path: Path, have: dict[str, Any], *, audio: MelConfig | None,
                    data: DataConfig | None) -> None:  # fmt: skip
    """The cache's settings `have` against the requested `audio` / `data` (None: any)."""
    want = dict(have)
    if audio is not None:
        want["audio"] = audio.to_dict()
    if data is not None:
        want["data"] = data.cache_settings()
    if settings_hash(have) == settings_hash(want):
        return
    diffs = _differences(have, want)
    raise CacheError(
        f"{path} was built with other settings than requested ({'; '.join(diffs[:5])}); "
        f"rebuild it with `xtts-data prepare --overwrite` or use a new --out folder"
    )


def _differences(have: Any, want: Any, prefix: str = "", *,
                 labels: tuple[str, str] = ("cache has", "requested")) -> list[str]:  # fmt: skip
    if isinstance(have, dict) and isinstance(want, dict):
        out = []
        for key in sorted(set(have) | set(want)):
            out += _differences(have.get(key), want.get(key), f"{prefix}{key}.", labels=labels)
        return out
    if have != want:
        return [f"{prefix.rstrip('.')}: {labels[0]} {have!r}, {labels[1]} {want!r}"]
    return []


def verify_cache(path: str | Path) -> list[str]:
    """Check the cache at `path`: the manifest against its settings hash, its checksums
    and tokenizer.json; every shard against its size and sha256; every record against
    the manifest's id, frames, tokens and speaker for it, and its size against its header.

    Returns:
        One message per problem, naming the file or sample; empty when the cache is intact.
    """
    path = Path(path)
    try:
        manifest = read_json(path / "manifest.json")
        shards = manifest["shards"]
        check_manifest(path, manifest)
    except (CacheError, KeyError, TypeError) as error:
        return [f"manifest: {error}"]
    problems = []
    for shard in shards:
        file = path / "shards" / shard["file"]
        if not file.is_file():
            problems.append(f"{shard['file']}: missing")
        elif file.stat().st_size != shard["bytes"]:
            problems.append(
                f"{shard['file']}: {file.stat().st_size} bytes, expected {shard['bytes']}"
            )
        elif sha256_file(file) != shard["sha256"]:
            problems.append(f"{shard['file']}: checksum mismatch (file changed or damaged)")
    for name in ("tokenizer.json", "report.json"):
        if not (path / name).is_file():
            problems.append(f"{name}: missing")
    return problems or _verify_records(path, manifest)


def _verify_records(path: Path, manifest: dict[str, Any]) -> list[str]:
    """Each record's header and id against the manifest's row for it, in order."""
    samples, n_mels, problems = manifest["samples"], manifest["num_mels"], []
    rows = iter(range(len(samples["id"])))
    for shard in manifest["shards"]:
        for position, raw in enumerate(
            tf.data.TFRecordDataset(str(path / "shards" / shard["file"]))
        ):
            header = record.read_header(raw.numpy(), n_mels)
            where = f"{shard['file']} record {position}"
            index = next(rows, None)
            if isinstance(header, str):
                problems.append(f"{where}: {header}")
                continue
            if index is None:
                problems.append(f"{where} ({header['id']}): not in the manifest")
                continue
            wanted = {key: samples[key][index] for key in ("id", "frames", "tokens", "speaker")}
            for key, value in wanted.items():
                if header[key] != value:
                    problems.append(f"{where} ({wanted['id']}): manifest says {key} {value!r}, "
                                    f"the record holds {header[key]!r}")  # fmt: skip
    left = sum(1 for _ in rows)
    if left:
        problems.append(f"{left} sample(s) of the manifest have no record")
    return problems
