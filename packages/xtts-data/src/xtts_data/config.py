"""`DataConfig`: how a corpus becomes a feature cache and the cache becomes batches.

One YAML file configures the whole stack: `read_stack` reads it (with `--set` overrides)
for every package, `load_config` builds the two sections this package owns (`audio`,
`data`); the others are their packages' (xtts-train's `model`, `train`, ...), which name
them when they read the file.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml

from xtts_audio import MelConfig
from xtts_audio.frozen_config import FrozenConfig
from xtts_data.errors import ConfigError
from xtts_data.text import TextConfig

__all__ = [
    "BuiltSettings", "DataConfig", "differences", "load_config", "override_key", "read_stack",
]  # fmt: skip

Policy = Literal["fixed", "buckets"]

SECTIONS = ("audio", "data")  # this package's; a stack's others are its readers' to name
# What a section the source leaves out starts from; `--set` overrides apply on top.
_DEFAULTS: dict[str, dict[str, Any]] = {"audio": {"preset": "xtts"}}


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig(FrozenConfig):
    """Cache building and batching settings.

    Cache (part of the cache's settings hash when they change the features):
        text: text normalisation and symbol set (`TextConfig`).
        trim_top_db: trim leading/trailing audio quieter than this many dB below the
            clip's peak before computing features (`None` keeps the audio whole). At the
            default, 40, the demo corpus's model (random silences around each clip) ended
            92% of its held-out sentences by the stop token against 17% untrimmed, and on
            600 espeak-ng clips (2,000 default steps) the held-out DTW distance was 2.35
            against 2.58 untrimmed, the stop token ending all 24 either way
            (docs/train/defaults.md).
        max_seconds: utterances longer than this (after trimming) are skipped and
            reported: one stray long clip would otherwise set the padded length of its
            bucket, or of every batch with `fixed`; `None` keeps every length.
        shard_size: utterances per cache shard (TFRecord file).
        keep_audio: also store each utterance's waveform (resampled and trimmed: the
            samples its mel was computed from) as int16, for a vocoder's aligned
            segments (`make_segment_dataset`); about 2 bytes per sample more. A cache
            built with it still serves every reader that does not ask for it.

    Batching (`make_dataset`):
        policy: `"fixed"` pads every batch to `max_text_len` x `max_frames`; `"buckets"`
            groups utterances into `num_buckets` length buckets, each with its own
            static shape and batch size.
        batch_size: utterances per batch (`fixed`), and the batch size of the longest
            bucket (`buckets`) unless `frame_budget` is set; segments per batch
            (`make_segment_dataset`).
        num_buckets: K, the most static batch shapes `buckets` may emit.
        frame_budget: padded mel frames per batch for `buckets` (batch size of a bucket =
            budget // its frames); `None` means `batch_size * max_frames`.
        batch_multiple: round every batch size down to a multiple of this (e.g. the
            number of replicas, so each gets an equal static share).
        batch_sizes: the batch size of each bucket, shortest first, in place of
            `frame_budget`'s (one per bucket the lengths give; `buckets` only). xtts-train
            plans them to fill a memory budget (`train.memory_budget_gb`) and writes them
            into its run's config.yaml.
        max_frames, max_text_len: longest utterance kept (longer ones are filtered and
            counted); `None` takes the longest in the data, rounded up to `pad_multiple`.
        pad_multiple: padded lengths are multiples of this.
        cond_frames: frames of the speaker-conditioning mel (a crop of another utterance
            of the same speaker).
        voice_warp: speaker augmentation of the `train` split: each row and its
            conditioning crop have their frequency axis scaled by one factor drawn from
            `1 / (1 + voice_warp)` to `1 + voice_warp` (`stages.WarpVoices`). The pitch
            and the formants move together, as with a shorter or longer vocal tract, so
            the model hears voices between and beyond the corpus's. 0 (the default): off.
        join: the `train` split's items join up to this many utterances of one speaker,
            the count drawn evenly from 1 to `join` for each window of `join` (`joins`),
            so the model trains on items longer than the clips; the batch shapes are
            planned for the joined lengths. 1 (the default): off.
        join_pause: seconds of silence between two joined utterances.
        join_from_epoch: a curriculum, with `join` > 1: the items stay single utterances
            for this many epochs of the `train` split, then join as `join` says (the
            shapes are planned for both from the start: no new shape, no compile when
            they begin). 0 (the default): joined from the first item.
        refs_per_speaker: reference crops per speaker kept for rows whose batch holds no
            other utterance of their speaker (fewer when the bank would exceed 64 MiB).
        val_fraction: share of utterances, chosen by a hash of their id, held out as the
            `"val"` split.
        segment_frames: mel frames of each aligned mel/waveform segment
            (`make_segment_dataset`); its waveform is `segment_frames * hop_length`
            samples.

    Input pipeline:
        keep_in_memory: keep the decoded utterances in RAM after the first epoch (later
            epochs then skip reading and decoding); `None` does so when the split's
            features take under a quarter of physical memory.
        shuffle_buffer: utterances in the shuffle buffer (0 disables shuffling).
        seed: shuffle/crop seed; `None` draws a fresh one each run.
        deterministic: keep element order reproducible (slower); default off.
        prefetch_to_device: e.g. `"/gpu:0"` to stage batches in device memory.
        service: `grpc://host:port` of a tf.data service dispatcher (`xtts-data serve`)
            to run preprocessing on its workers; `None` runs it in-process.

    `from_dict` takes `text` as a nested mapping; `to_dict` writes it as one.
    """

    error_type = ConfigError

    text: TextConfig = dataclasses.field(default_factory=TextConfig)
    trim_top_db: float | None = 40.0
    max_seconds: float | None = 20.0
    shard_size: int = 256
    keep_audio: bool = False
    policy: Policy = "buckets"
    batch_size: int = 32
    num_buckets: int = 8
    frame_budget: int | None = None
    batch_multiple: int = 1
    batch_sizes: tuple[int, ...] | None = None
    max_frames: int | None = None
    max_text_len: int | None = None
    pad_multiple: int = 8
    cond_frames: int = 128
    voice_warp: float = 0.0
    join: int = 1
    join_pause: float = 0.2
    join_from_epoch: int = 0
    refs_per_speaker: int = 4
    val_fraction: float = 0.05
    segment_frames: int = 32
    keep_in_memory: bool | None = None
    shuffle_buffer: int = 4096
    seed: int | None = None
    deterministic: bool = False
    prefetch_to_device: str | None = None
    service: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, TextConfig):
            self._fail("text", self.text, "a TextConfig")
        if self.trim_top_db is not None and not (
            is_number(self.trim_top_db) and self.trim_top_db > 0
        ):
            self._fail("trim_top_db", self.trim_top_db, "a positive number of dB or None")
        if self.max_seconds is not None and not (
            is_number(self.max_seconds) and self.max_seconds > 0
        ):
            self._fail("max_seconds", self.max_seconds, "a positive number of seconds or None")
        if self.policy not in ("fixed", "buckets"):
            self._fail("policy", self.policy, "'fixed' or 'buckets'")
        self._check_positive("shard_size", "batch_size", "num_buckets", "batch_multiple")
        self._check_positive("pad_multiple", "cond_frames", "refs_per_speaker", "segment_frames")
        self._check_positive("join")
        if not (is_number(self.join_pause) and 0.0 <= self.join_pause <= 2.0):
            self._fail("join_pause", self.join_pause, "a number of seconds in [0, 2]")
        if not (is_int(self.join_from_epoch) and self.join_from_epoch >= 0):
            self._fail("join_from_epoch", self.join_from_epoch, "an int >= 0")
        if self.join_from_epoch and self.join == 1:
            self._fail("join_from_epoch", self.join_from_epoch,
                       "0 while join is 1 (it says when joining begins; set join > 1)")  # fmt: skip
        self._check_positive("frame_budget", "max_frames", "max_text_len", optional=True)
        if self.batch_size % self.batch_multiple:
            self._fail(
                "batch_size", self.batch_size, f"a multiple of batch_multiple={self.batch_multiple}"
            )
        self._check_batch_sizes()
        if not (is_number(self.voice_warp) and 0.0 <= self.voice_warp < 1.0):
            self._fail("voice_warp", self.voice_warp, "a number in [0, 1)")
        if not (is_number(self.val_fraction) and 0.0 <= self.val_fraction < 1.0):
            self._fail("val_fraction", self.val_fraction, "a fraction in [0, 1)")
        if not isinstance(self.keep_audio, bool):
            self._fail("keep_audio", self.keep_audio, "true or false")
        if self.keep_in_memory is not None and not isinstance(self.keep_in_memory, bool):
            self._fail("keep_in_memory", self.keep_in_memory, "true, false or null (automatic)")
        if not (is_int(self.shuffle_buffer) and self.shuffle_buffer >= 0):
            self._fail("shuffle_buffer", self.shuffle_buffer, "an int >= 0")
        if self.service is not None and not str(self.service).startswith(("grpc://", "grpc+")):
            self._fail("service", self.service, "a dispatcher address like 'grpc://host:5050'")

    def _check_batch_sizes(self) -> None:
        sizes = self.batch_sizes
        if sizes is None:
            return
        if not (isinstance(sizes, list | tuple) and sizes and all(is_int(s) for s in sizes)
                and all(s >= 1 and s % self.batch_multiple == 0 for s in sizes)):  # fmt: skip
            expected = f"ints >= 1, multiples of batch_multiple={self.batch_multiple}, or None"
            self._fail("batch_sizes", sizes, expected)
        if self.policy != "buckets":
            self._fail("batch_sizes", sizes, "None with policy 'fixed' (batch_size sets it)")
        object.__setattr__(self, "batch_sizes", tuple(sizes))  # frozen, hashable

    def _check_positive(self, *names: str, optional: bool = False) -> None:
        for name in names:
            value = getattr(self, name)
            if optional and value is None:
                continue
            if not is_int(value) or value < 1:
                self._fail(name, value, "an int >= 1" + (" or None" if optional else ""))

    def cache_settings(self) -> dict[str, Any]:
        """The settings that change cached features (hashed into the cache manifest).

        `keep_audio` is named only when true: the records then hold waveforms as well, so
        a build with it is another build (no resume mixes the two), and a reader that
        needs them checks for it (`FeatureCache.has_audio`). A cache with waveforms
        serves a caller without `keep_audio` too (see `FeatureCache.check_settings`).
        """
        settings = {"text": self.text.to_dict(), "trim_top_db": self.trim_top_db,
                    "max_seconds": self.max_seconds}  # fmt: skip
        return {**settings, "keep_audio": True} if self.keep_audio else settings

    def too_long(self, seconds: float) -> str | None:
        """Why an utterance of `seconds` is skipped (over `max_seconds`), or None."""
        if self.max_seconds is not None and seconds > self.max_seconds:
            return f"too long: {seconds:.1f} s, over data.max_seconds={self.max_seconds}"
        return None

    def round_up(self, length: int) -> int:
        """`length` rounded up to a multiple of `pad_multiple`."""
        return int(math.ceil(length / self.pad_multiple) * self.pad_multiple)


def load_config(
    source: str | Path | Mapping[str, Any] | None, overrides: Sequence[str] = (), *,
    built: BuiltSettings | None = None,
) -> tuple[MelConfig, DataConfig]:  # fmt: skip
    """The `audio` and `data` sections of a stack config (see `read_stack`).

    `audio` takes `MelConfig.from_dict` fields (e.g. `preset: xtts` plus overrides) and
    defaults to the `"xtts"` preset; `data` takes `DataConfig` fields. The other sections
    (xtts-train's) are not read here.

    Args:
        source: a YAML file, the mapping it holds, or `None` for all defaults.
        overrides: `section.key=value` settings applied on top (as `--set`).
        built: the settings a cache was built with (see `read_stack`).

    Raises:
        ConfigError: unreadable file, unknown section or field, a malformed override, an
            invalid value (an `audio` one as xtts_audio's `ConfigError`), or a setting
            that disagrees with `built`.
    """
    sections = read_stack(source, overrides, built=built)
    audio = MelConfig.from_dict(sections["audio"], section="audio")
    data = DataConfig.from_dict(sections["data"], section="data")
    return audio, data


def read_stack(
    source: str | Path | Mapping[str, Any] | None, overrides: Sequence[str] = (), *,
    built: BuiltSettings | None = None, sections: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Every section of a stack config as a plain dict, defaults filled, overrides applied.

    The one reader of stack configs: `load_config`, `xtts_train.load_stack_config` and
    through it a run's `config.yaml` build their dataclasses from what this returns. A
    section the source leaves out or empty is `{}`, except `audio`: `{"preset": "xtts"}`,
    so `--set audio.n_mels=64` changes the default recipe. Override values are YAML
    (`train.steps=200`, `data.text.languages=[en, fa]`); dotted keys reach nested sections.

    With `built`, the settings a cache was built with (its manifest's `settings`), the
    cache is where the feature settings come from: what the source and overrides leave
    out of them is the cache's (the whole `audio` recipe, and the data settings of
    `DataConfig.cache_settings`: `text.*`, `trim_top_db`, `max_seconds`, `keep_audio`),
    and one they give that disagrees with the cache's is an error naming it. So `prepare`
    takes the settings once, and what reads the cache needs no second copy of them.

    Args:
        source: a YAML file, the mapping it holds, or `None` for all defaults.
        overrides: `section.key=value` settings, applied in order.
        built: `{"audio": MelConfig.to_dict(), "data": DataConfig.cache_settings()}` of a
            cache's build (`Manifest.settings`), or None.
        sections: every section the stack has (xtts-train's `SECTIONS`); another is an
            error. None: `audio`, `data` and whatever others the source and overrides name
            (this package's commands read a whole stack file and use two of its sections).

    Raises:
        ConfigError: unreadable file, unknown section, a section that is not a mapping, a
            malformed override, or a feature setting that disagrees with `built`.
    """
    label = f"{source}" if isinstance(source, str | Path) else "stack config"
    values = _read_yaml(source) if isinstance(source, str | Path) else source or {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"Expected a mapping of sections, received: {values!r}")
    if sections is None:
        named = [override_key(o).split(".")[0] for o in overrides]
        sections = list(dict.fromkeys([*SECTIONS, *map(str, values), *named]))
    unknown = sorted(set(values) - set(sections))
    if unknown:
        raise ConfigError(f"{label}: unknown section(s) {unknown}; known: {list(sections)}")
    for name, section in values.items():
        if section is not None and not isinstance(section, Mapping):
            raise ConfigError(f"{label}: section {name!r} must be a mapping, received: {section!r}")
    read = {name: copy.deepcopy(dict(values.get(name) or _DEFAULTS.get(name) or {}))
            for name in sections}  # fmt: skip
    given = {name: copy.deepcopy(dict(values.get(name) or {})) for name in sections}
    for override in overrides:
        _apply(read, override)
        _apply(given, override)
    if built is not None:
        _adopt_built(read, given, built)
    return read


class BuiltSettings(Protocol):
    """What `read_stack` reads of a cache's build settings (`manifest.CacheSettings`)."""

    audio: dict[str, Any]
    data: dict[str, Any]


def _adopt_built(sections: dict[str, dict[str, Any]], given: dict[str, dict[str, Any]],
                 built: BuiltSettings) -> None:  # fmt: skip
    """Fill `sections`' feature settings that `given` leaves out from `built`; refuse the
    given ones that disagree with it (the `read_stack` contract)."""
    if not given["audio"]:
        sections["audio"] = copy.deepcopy(built.audio)
    data, wanted_text = sections["data"], dict(given["data"].get("text") or {})
    for key, value in built.data.items():
        if key == "text":
            data["text"] = {**copy.deepcopy(value), **wanted_text}
        elif key not in given["data"]:
            data[key] = copy.deepcopy(value)
    audio = MelConfig.from_dict(sections["audio"], section="audio").to_dict()
    settings = DataConfig.from_dict(data, section="data").cache_settings()
    # Waveforms are extra, not other features: a cache with them serves a caller without
    # them, and one that asks for them of a cache without is refused where it is opened.
    settings.pop("keep_audio", None)
    have = {**built.data}
    have.pop("keep_audio", None)
    diffs = differences({"audio": built.audio, "data": have}, {"audio": audio, "data": settings},
                        labels=("the cache was built with", "the config gives"))  # fmt: skip
    if diffs:
        raise ConfigError(
            f"the config disagrees with the cache it reads ({'; '.join(diffs[:3])}): leave "
            f"the setting out (the cache's is used) or rebuild the cache with it "
            f"(`xtts-data prepare --overwrite`)"
        )


def differences(have: Any, want: Any, prefix: str = "", *,
                labels: tuple[str, str] = ("cache has", "requested")) -> list[str]:  # fmt: skip
    """`"key.path: <labels[0]> <have>, <labels[1]> <want>"` for every leaf of two nested
    dicts that differs (keys sorted), the way settings mismatches are named."""
    if isinstance(have, dict) and isinstance(want, dict):
        out = []
        for key in sorted(set(have) | set(want)):
            out += differences(have.get(key), want.get(key), f"{prefix}{key}.", labels=labels)
        return out
    if have != want:
        return [f"{prefix.rstrip('.')}: {labels[0]} {have!r}, {labels[1]} {want!r}"]
    return []


def _read_yaml(path: str | Path) -> Any:
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise ConfigError(
            f"Expected a readable YAML config, received: path={path} ({error})"
        ) from None


def override_key(override: str) -> str:
    """The `section.key` of a `section.key=value` override, as `read_stack` reads it."""
    return override.partition("=")[0].strip()


def _apply(sections: dict[str, dict[str, Any]], override: str) -> None:
    """Set one `section.key=value` (the value parsed as YAML) in `sections`."""
    _, sep, raw = override.partition("=")
    parts = override_key(override).split(".")
    if not sep or len(parts) < 2 or parts[0] not in sections:
        raise ConfigError(
            f"Expected --set section.key=value with section one of {', '.join(sections)}, "
            f"received: {override!r}"
        )
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise ConfigError(f"--set {override!r}: value is not valid YAML ({error})") from None
    node = sections[parts[0]]
    for part in parts[1:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {override!r}: {part} is not a section")
    node[parts[-1]] = value
