"""The feature cache on disk: layout, settings hash, manifest, and integrity checks.

```
CACHE/
  build.json              settings + plan of the build (written first; resume checks it)
  shards/shard-00000-of-00012.tfrecord   tf.train.Example per utterance
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
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from xtts_audio import MelConfig
from xtts_data.config import DataConfig
from xtts_data.errors import CacheError
from xtts_data.text import Tokenizer

__all__ = ["FORMAT_VERSION", "FeatureCache", "settings_hash", "settings_of", "verify_cache"]

FORMAT_VERSION = 3  # 2: raw little-endian records (xtts_data.record); 3: languages


def settings_of(audio: MelConfig, data: DataConfig) -> dict[str, Any]:
    """Everything that changes the cached features (the settings hash covers exactly this)."""
    return {"format": FORMAT_VERSION, "audio": audio.to_dict(), "data": data.cache_settings()}


def settings_hash(settings: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of `settings`."""
    return hashlib.sha256(canonical_json(settings).encode()).hexdigest()


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def write_json_atomic(path: Path, value: Any) -> None:
    """Write `value` as JSON so that `path` is either the old file or the complete new one."""
    text = json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        have = manifest["settings"]
        want = dict(have)
        if audio is not None:
            want["audio"] = audio.to_dict()
        if data is not None:
            want["data"] = data.cache_settings()
        _check_settings(path, have, want)
        tokenizer = Tokenizer.from_dict(read_json(path / "tokenizer.json"))
        return cls(path, manifest, MelConfig.from_dict(manifest["settings"]["audio"]), tokenizer)

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


def _check_settings(path: Path, have: dict[str, Any], want: dict[str, Any]) -> None:
    if settings_hash(have) == settings_hash(want):
        return
    diffs = _differences(have, want)
    raise CacheError(
        f"{path} was built with other settings than requested ({'; '.join(diffs[:5])}); "
        f"rebuild it with `xtts-data prepare --overwrite` or use a new --out folder"
    )


def _differences(have: Any, want: Any, prefix: str = "") -> list[str]:
    if isinstance(have, dict) and isinstance(want, dict):
        out = []
        for key in sorted(set(have) | set(want)):
            out += _differences(have.get(key), want.get(key), f"{prefix}{key}.")
        return out
    if have != want:
        return [f"{prefix.rstrip('.')}: cache has {have!r}, requested {want!r}"]
    return []


def verify_cache(path: str | Path) -> list[str]:
    """Check every shard of the cache at `path` against the manifest's checksums.

    Returns:
        One message per problem (missing manifest, missing shard, wrong size or
        checksum); empty when the cache is intact.
    """
    path = Path(path)
    try:
        manifest = read_json(path / "manifest.json")
        shards = manifest["shards"]
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
    return problems
