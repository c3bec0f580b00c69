"""The feature cache on disk: layout, settings hash, manifest, and the checks made when
one is opened (`xtts_data.verify` reads every byte of one).

```
CACHE/
  build.json              settings + plan of the build (written first; resume checks it)
  shards/shard-00000-of-00012.tfrecord   one record per utterance: raw little-endian
                          words (header, token ids, mel, int16 waveform with
                          `data.keep_audio`, id), not a tf.train.Example; layout in
                          `xtts_data.record`
  shards/shard-00000-of-00012.json       per-shard sidecar (samples, skips, sha256)
  tokenizer.json          symbol table (and languages) of the character tokenizer
  report.json             {"ok": n, "skipped": [{"id", "reason"}], "dropped": {char: n},
                          "oov": {char: n}, "languages": {tag: n}, ...}
  manifest.json           written last: settings hash, speakers, languages, per-sample
                          lengths, shard checksums, counts
```
Every file appears complete or not at all (temp file + rename). manifest.json is read
and written only through `Manifest` (`FeatureCache.manifest`), its parts typed:
`CacheSettings`, `Counts`, `SampleTable` (NumPy columns), `Integrity`, `ShardEntry`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from xtts_audio import MelConfig
from xtts_data.config import DataConfig, differences
from xtts_data.errors import CacheError
from xtts_data.text import Tokenizer

__all__ = [
    "FORMAT_VERSION",
    "CacheSettings",
    "Counts",
    "FeatureCache",
    "Integrity",
    "Manifest",
    "SampleTable",
    "ShardEntry",
    "settings_hash",
    "settings_of",
]

# 2: raw little-endian records (xtts_data.record); 3: languages; 4: integrity; 5: a waveform
# word in every record header (and the waveform itself with `data.keep_audio`)
FORMAT_VERSION = 5
MANIFEST = "manifest.json"


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


def _bad_key(file: Path | str, key: str, problem: str) -> CacheError:
    return CacheError(f"{file}: key {key!r} {problem}; rebuild it with `xtts-data prepare "
                      f"--overwrite`")  # fmt: skip


def _get(data: Any, key: str, kind: type | tuple[type, ...], file: Path | str,
         prefix: str = "") -> Any:  # fmt: skip
    """`data[key]`, checked to be a `kind`.

    Raises:
        CacheError: naming the key (`counts.ok`) and the file when it is missing or of
            another type (a bool is not an int).
    """
    if not isinstance(data, dict) or key not in data:
        raise _bad_key(file, prefix + key, "is missing")
    value = data[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise _bad_key(file, prefix + key, f"is {type(value).__name__}, expected {names}")
    return value


def _strings(data: Any, key: str, file: Path | str, prefix: str = "") -> tuple[str, ...]:
    """`data[key]`, a list of str, as a tuple."""
    values = _get(data, key, list, file, prefix)
    if not all(isinstance(v, str) for v in values):
        raise _bad_key(file, prefix + key, "is not a list of str")
    return tuple(values)


def _ints(data: Any, key: str, file: Path | str, prefix: str = "") -> np.ndarray:
    """`data[key]`, a list of int, as a read-only int64 [n] array."""
    try:
        values = np.asarray(_get(data, key, list, file, prefix))
    except ValueError:  # nested lists of several lengths
        values = np.asarray([None])
    if values.size and (values.ndim != 1 or values.dtype.kind not in "iu"):
        raise _bad_key(file, prefix + key, "is not a list of int")
    return _read_only(values.astype(np.int64).reshape(-1))


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False  # shared by every reader of the opened cache
    return array


def _read(cls: type, data: Any, key: str, kinds: dict[str, Any], file: Path | str) -> Any:
    """`cls` of `data[key]`'s keys named by `kinds` (each checked to be its kind)."""
    part = _get(data, key, dict, file)
    return cls(**{name: _get(part, name, kind, file, f"{key}.") for name, kind in kinds.items()})


@dataclasses.dataclass(frozen=True, kw_only=True)
class CacheSettings:
    """What the settings hash covers (`settings_of`, manifest.json's `settings`).

    Attributes:
        format: the cache format the settings were written for.
        audio: `MelConfig.to_dict()` of the build.
        data: `DataConfig.cache_settings()` of the build.
    """

    format: int
    audio: dict[str, Any]
    data: dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Counts:
    """Totals of the build (manifest.json's `counts`).

    Attributes:
        ok, skipped: utterances in the cache, rows left out (see report.json).
        shards, frames: shard files, mel frames of all utterances.
        audio_seconds: seconds of audio of all utterances, rounded to ms.
        languages: utterances per language tag, in the manifest's language order.
    """

    ok: int
    skipped: int
    shards: int
    frames: int
    audio_seconds: float
    languages: dict[str, int]


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class SampleTable:
    """The per-sample table (manifest.json's `samples`), one read-only column per field,
    in the cache's record order.

    Attributes:
        id: object [n] of str, the utterance ids.
        speaker: int64 [n], index into the manifest's speakers.
        language: int64 [n], index into the manifest's languages.
        frames: int64 [n], mel frames.
        tokens: int64 [n], token ids (EOS included).
        shard: int64 [n], index into the manifest's shards.
    """

    id: np.ndarray
    speaker: np.ndarray
    language: np.ndarray
    frames: np.ndarray
    tokens: np.ndarray
    shard: np.ndarray

    def __post_init__(self) -> None:
        for name, column in self.columns().items():
            if not isinstance(column, np.ndarray) or column.ndim != 1:
                raise CacheError(
                    f"Expected SampleTable.{name} a 1-D NumPy array, received: "
                    f"{name}={type(column).__name__} {np.shape(column)}"
                )

    @classmethod
    def from_json(cls, data: Any, *, file: Path | str = MANIFEST) -> SampleTable:
        """The table of `data` (manifest.json's `samples`: a list per column)."""
        ids = np.array(_strings(data, "id", file, "samples."), dtype=object)
        columns = {k: _ints(data, k, file, "samples.") for k in _INT_COLUMNS}
        return cls(id=_read_only(ids), **columns)

    def to_json(self) -> dict[str, list]:
        return {name: column.tolist() for name, column in self.columns().items()}

    def columns(self) -> dict[str, np.ndarray]:
        """The columns by name, in the manifest's order."""
        return {"id": self.id, **{k: getattr(self, k) for k in _INT_COLUMNS}}

    def __len__(self) -> int:
        return len(self.id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SampleTable):
            return NotImplemented
        return all(np.array_equal(a, b) for a, b in
                   zip(self.columns().values(), other.columns().values(), strict=True))  # fmt: skip

    __hash__ = None  # type: ignore[assignment]


_INT_COLUMNS = ("speaker", "language", "frames", "tokens", "shard")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Integrity:
    """Checksums the build wrote (manifest.json's `integrity`): any later edit of the
    per-sample table or of tokenizer.json is found at open.

    Attributes:
        samples_sha256: sha256 of the canonical JSON of the per-sample table.
        tokenizer_sha256: sha256 of tokenizer.json's bytes.
    """

    samples_sha256: str
    tokenizer_sha256: str

    @classmethod
    def of(cls, samples: dict[str, list], tokenizer_json: bytes) -> Integrity:
        """The checksums of a per-sample table (its JSON form) and of tokenizer.json."""
        return cls(
            samples_sha256=hashlib.sha256(canonical_json(samples).encode()).hexdigest(),
            tokenizer_sha256=hashlib.sha256(tokenizer_json).hexdigest(),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardEntry:
    """One shard file (an entry of manifest.json's `shards`).

    Attributes:
        file: the file name under `shards/`.
        bytes, sha256: its size and checksum.
        samples: utterances (records) in it.
    """

    file: str
    bytes: int
    sha256: str
    samples: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Manifest:
    """manifest.json, the index of a complete feature cache (written last by `prepare`).

    `from_json(to_json())` is the same manifest, and `to_json()` of a read manifest is the
    file's JSON: a cache reopened and rewritten is byte-identical.

    Attributes:
        format: the cache format (`FORMAT_VERSION`).
        settings: what the features were built with (the settings hash covers it).
        settings_hash: `settings_hash` of `settings` as the build wrote it.
        speakers: speaker names; a sample's `speaker` indexes this.
        languages: language tags; a sample's `language` indexes this.
        num_mels: mel channels of every record.
        counts: totals of the build.
        samples: the per-sample table, in record order.
        integrity: checksums of the table and of tokenizer.json.
        shards: the shard files, in order.
    """

    format: int = FORMAT_VERSION
    settings: CacheSettings
    settings_hash: str
    speakers: tuple[str, ...]
    languages: tuple[str, ...]
    num_mels: int
    counts: Counts
    samples: SampleTable
    integrity: Integrity
    shards: tuple[ShardEntry, ...]

    def __post_init__(self) -> None:
        if self.format != FORMAT_VERSION:
            raise CacheError(f"Expected format={FORMAT_VERSION}, received: format={self.format!r}")
        for name in ("speakers", "languages", "shards"):
            if not isinstance(getattr(self, name), tuple):
                raise CacheError(f"Expected Manifest.{name} a tuple, received: "
                                 f"{name}={type(getattr(self, name)).__name__}")  # fmt: skip

    @classmethod
    def read(cls, cache: str | Path) -> Manifest:
        """The manifest.json of the cache folder `cache`.

        Raises:
            CacheError: the file is missing or unreadable, of another cache format, or a
                key is missing or of another type (naming the key and the file).
        """
        file = Path(cache) / MANIFEST
        return cls.from_json(read_json(file), file=file)

    @classmethod
    def from_json(cls, data: Any, *, file: Path | str = MANIFEST) -> Manifest:
        """The manifest of parsed manifest.json `data`; `file` names it in errors.

        Raises:
            CacheError: another cache format, or a key missing or of another type.
        """
        found = data.get("format") if isinstance(data, dict) else None
        if found != FORMAT_VERSION:
            raise CacheError(f"{file}: cache format {found!r}, this xtts-data reads format "
                             f"{FORMAT_VERSION}; rebuild it with `xtts-data prepare`")  # fmt: skip
        counts = _read(Counts, data, "counts", _COUNTS, file)
        for tag in counts.languages:
            _get(counts.languages, tag, int, file, "counts.languages.")
        shards = {f"shards[{i}]": s for i, s in enumerate(_get(data, "shards", list, file))}
        return cls(
            format=found,
            settings=copy.deepcopy(_read(CacheSettings, data, "settings", _SETTINGS, file)),
            settings_hash=_get(data, "settings_hash", str, file),
            speakers=_strings(data, "speakers", file),
            languages=_strings(data, "languages", file),
            num_mels=_get(data, "num_mels", int, file),
            counts=dataclasses.replace(counts, languages=dict(counts.languages)),
            samples=SampleTable.from_json(_get(data, "samples", dict, file), file=file),
            integrity=_read(Integrity, data, "integrity", _INTEGRITY, file),
            shards=tuple(_read(ShardEntry, shards, key, _SHARD, file) for key in shards),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON form, key for key what `from_json` reads."""
        return {
            "format": self.format,
            "settings": dataclasses.asdict(self.settings),
            "settings_hash": self.settings_hash,
            "speakers": list(self.speakers),
            "languages": list(self.languages),
            "num_mels": self.num_mels,
            "counts": dataclasses.asdict(self.counts),
            "samples": self.samples.to_json(),
            "integrity": dataclasses.asdict(self.integrity),
            "shards": [dataclasses.asdict(shard) for shard in self.shards],
        }


# The kind of each key of the parts of manifest.json (bool is never an int).
_SETTINGS = {"format": int, "audio": dict, "data": dict}
_COUNTS = {"ok": int, "skipped": int, "shards": int, "frames": int,
           "audio_seconds": (int, float), "languages": dict}  # fmt: skip
_INTEGRITY = {"samples_sha256": str, "tokenizer_sha256": str}
_SHARD = {"file": str, "bytes": int, "sha256": str, "samples": int}


@dataclasses.dataclass(frozen=True)
class FeatureCache:
    """An opened, complete feature cache (`xtts-data prepare` output).

    Attributes:
        path: the cache folder.
        manifest: its manifest.json; `manifest.samples` is the per-sample table.
        audio: the mel recipe the features were computed with.
        tokenizer: the tokenizer the token ids come from.
    """

    path: Path
    manifest: Manifest
    audio: MelConfig
    tokenizer: Tokenizer

    @staticmethod
    def is_cache(path: str | Path) -> bool:
        """Whether `path` is a feature cache folder (it holds a manifest.json), not a corpus."""
        return (Path(path) / MANIFEST).is_file()

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
        manifest = Manifest.read(path)
        tokenizer = check_manifest(path, manifest)
        _check_settings(path, manifest.settings, audio=audio, data=data)
        return cls(path, manifest, MelConfig.from_dict(manifest.settings.audio), tokenizer)

    def check_settings(
        self, *, audio: MelConfig | None = None, data: DataConfig | None = None
    ) -> None:
        """The check `open` makes, for a cache opened earlier: `audio` and `data` (those
        given) must be the settings the cache was built with.

        Raises:
            CacheError: naming each differing field (`audio.n_mels: cache has 80,
                requested 64`); `data.keep_audio` on a cache without waveforms (one with
                them serves a caller without it).
        """
        _check_settings(self.path, self.manifest.settings, audio=audio, data=data)

    @property
    def has_audio(self) -> bool:
        """Whether the records hold waveforms (the cache was built with `data.keep_audio`)."""
        return bool(self.manifest.settings.data.get("keep_audio", False))

    @property
    def languages(self) -> list[str]:
        """Language tags of the corpus; a sample's `language` is an index into this list."""
        return list(self.manifest.languages)

    @property
    def speakers(self) -> list[str]:
        """Speaker names; a sample's `speaker` is an index into this list."""
        return list(self.manifest.speakers)

    @property
    def shard_paths(self) -> list[Path]:
        return [self.path / "shards" / shard.file for shard in self.manifest.shards]


def _fail(path: Path, what: str) -> None:
    raise CacheError(f"{path}: {what}; rebuild it with `xtts-data prepare --overwrite`")


def check_manifest(path: Path, manifest: Manifest) -> Tokenizer:
    """The manifest agrees with itself, with the build's settings and with tokenizer.json.

    Returns:
        The cache's tokenizer (tokenizer.json, checked).

    Raises:
        CacheError: naming what disagrees (settings edited after the build, the per-sample
            table or tokenizer.json changed, its languages or an index outside its list).
    """
    settings = dataclasses.asdict(manifest.settings)
    if settings_hash(settings) != manifest.settings_hash:
        built = path / "build.json"
        labels = ("built with", "manifest says")
        diffs = (differences(read_json(built)["settings"], settings, labels=labels)
                 if built.exists() else [])  # fmt: skip
        named = "; ".join(diffs[:5]) or "no build.json to compare with"
        _fail(path, f"manifest.json's settings were changed after the build ({named})")
    samples, checks = manifest.samples, manifest.integrity
    lengths = {name: len(column) for name, column in samples.columns().items()}
    if set(lengths.values()) != {manifest.counts.ok}:
        _fail(path, f"manifest.json's per-sample columns have lengths {lengths}, expected "
                    f"{manifest.counts.ok} each")  # fmt: skip
    tokenizer_file = path / "tokenizer.json"
    tokenizer_json = tokenizer_file.read_bytes() if tokenizer_file.exists() else b""
    found = Integrity.of(samples.to_json(), tokenizer_json)
    if found.samples_sha256 != checks.samples_sha256:
        _fail(path, "manifest.json's per-sample table (ids, frames, tokens, speakers, "
                    "shards) was changed after the build (checksum mismatch)")  # fmt: skip
    if found.tokenizer_sha256 != checks.tokenizer_sha256:
        _fail(path, "tokenizer.json is missing or differs from the one the cache was built with")
    for column, indices, names in (("speaker", samples.speaker, manifest.speakers),
                                   ("language", samples.language, manifest.languages)):  # fmt: skip
        if len(indices) and indices.max() >= len(names):
            _fail(path, f"a sample's {column} index {int(indices.max())} is outside the "
                        f"manifest's {len(names)} {column}s")  # fmt: skip
    tokenizer = Tokenizer.from_dict(json.loads(tokenizer_json))
    if tuple(tokenizer.languages) != manifest.languages:
        _fail(path, f"tokenizer.json's languages {list(tokenizer.languages)} disagree with the "
                    f"manifest's {list(manifest.languages)}")  # fmt: skip
    return tokenizer


def _check_settings(path: Path, settings: CacheSettings, *, audio: MelConfig | None,
                    data: DataConfig | None) -> None:  # fmt: skip
    """The cache's `settings` against the requested `audio` / `data` (None: any).

    Waveforms are extra, not other features: a cache with them (`keep_audio`) serves a
    caller that does not ask for them; one without them refuses a caller that does.
    """
    have = dataclasses.asdict(settings)
    want = dict(have)
    if audio is not None:
        want["audio"] = audio.to_dict()
    if data is not None:
        has_audio = have["data"].get("keep_audio", False)
        if data.keep_audio and not has_audio:
            raise CacheError(
                f"{path} was built without waveforms (data.keep_audio is false), which "
                f"were requested (e.g. for vocoder segments); rebuild it with `xtts-data "
                f"prepare CORPUS --out {path} --set data.keep_audio=true --overwrite` (with "
                f"the --config it was built with)"
            )
        want["data"] = {**data.cache_settings(), **({"keep_audio": True} if has_audio else {})}
    if settings_hash(have) == settings_hash(want):
        return
    diffs = differences(have, want)
    raise CacheError(
        f"{path} was built with other settings than requested ({'; '.join(diffs[:5])}); "
        f"rebuild it with `xtts-data prepare --overwrite` or use a new --out folder"
    )
