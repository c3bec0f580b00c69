"""The engine's and the server's settings: frozen, keyword-only, checked when made; and
the voice aliases they name (`--voice-alias`, a voices folder's `voices.yaml`).

Standard library and PyYAML only: the console script checks its flags (and a voices.yaml)
before TensorFlow loads.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import yaml

from xtts_serve.errors import ConfigError

__all__ = [
    "ENV_API_KEY",
    "MAX_NAME_CHARS",
    "RUNTIMES",
    "VOCODER_BATCHING",
    "VOICES_FILE",
    "EngineConfig",
    "ServerConfig",
    "json_body_limit",
    "parse_voice_alias",
    "voice_aliases",
]

ENV_API_KEY = "XTTS_SERVE_API_KEY"  # the API key's environment variable (`--api-key`)
VOCODER_BATCHING = ("auto", "on", "off")
RUNTIMES = ("tf", "onnx")  # what decodes: TensorFlow on a run, onnxruntime on an exported voice
VOICES_FILE = "voices.yaml"  # in a `--voices` folder: voice aliases, `NAME: VOICE` each
MAX_NAME_CHARS = 64  # a voice's id or name, an alias, a model alias


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """What an `Engine` (or an `OnnxEngine`) loads and the limits of what it speaks.

    Attributes:
        run: a text-to-mel training run (`xtts-train fit`); with `runtime` onnx, a voice
            folder (`xtts-train export --format onnx`), which holds its vocoder.
        vocoder: a vocoder run trained on the run's audio settings; None: Griffin-Lim
            (no streaming).
        max_chars: the longest text of one request, in characters as sent.
        voices: a folder of clips (`.wav`, `.flac`, `.ogg`), each a voice named by its
            file's stem, conditioned on at start-up; None: the run's own voice alone.
        max_voices: uploaded voices kept; past it the least recently used is forgotten.
        max_clip_seconds: the longest clip a voice is made from (decoded, at the run's
            sample rate).
        overrides: `decode.KEY=VALUE` settings of the run's decoding, as
            `xtts-train synthesize --set` takes them.
        slots: requests decoded side by side, each in a row of one compiled batch
            (1: one at a time).
        vocoder_batching: `on`: the streams' vocoder windows of a decoder step run as one
            batch (a lone window at batch 2, so that it rounds as it does beside others);
            `off`: each window alone; `auto`: on with a GPU, off on a CPU, where batching
            saved little and slowed a lone stream (docs/bench/serve.md).
        voice_aliases: `NAME=VOICE` entries (`--voice-alias`): a name a request may give
            for the voice VOICE (the run's, or a `voices` clip's), over the same name in
            the folder's `VOICES_FILE` (`voice_aliases` merges them; the voices check the
            targets when they load). Each name once.
        runtime: `tf`, TensorFlow's programs on a run (`Engine`); `onnx`, an exported
            voice in onnxruntime (`OnnxEngine`, no TensorFlow), which decodes as it was
            exported: no `vocoder`, `overrides` or `vocoder_batching` of its own.
        threads: with `onnx`, the threads of its large programs (the vocoder, finish,
            prefill; a decoder step runs on one); None: every core this process may use.
    """

    run: Path
    vocoder: Path | None = None
    max_chars: int = 1000
    voices: Path | None = None
    max_voices: int = 64
    max_clip_seconds: float = 30.0
    overrides: tuple[str, ...] = ()
    slots: int = 4
    vocoder_batching: str = "auto"
    voice_aliases: tuple[str, ...] = ()
    runtime: str = "tf"
    threads: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "run", Path(self.run))
        for name in ("vocoder", "voices"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, Path(value))
        object.__setattr__(self, "overrides", tuple(self.overrides))
        object.__setattr__(self, "voice_aliases", _strings("voice_aliases", self.voice_aliases))
        names = [parse_voice_alias(entry)[0] for entry in self.voice_aliases]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ConfigError(f"Expected each voice alias (--voice-alias) named once, received: "
                              f"{twice} more than once")  # fmt: skip
        _check_int("max_chars", self.max_chars)
        _check_int("max_voices", self.max_voices)
        _check_int("slots", self.slots)
        _check_positive("max_clip_seconds", self.max_clip_seconds)
        if self.vocoder_batching not in VOCODER_BATCHING:
            raise ConfigError(f"Expected vocoder_batching one of {list(VOCODER_BATCHING)}, "
                              f"received: {self.vocoder_batching!r}")  # fmt: skip
        if self.runtime not in RUNTIMES:
            raise ConfigError(f"Expected runtime one of {list(RUNTIMES)}, received: "
                              f"{self.runtime!r}")  # fmt: skip
        if self.threads is not None:
            _check_int("threads", self.threads)
        _check_runtime(self)


def _check_runtime(config: EngineConfig) -> None:
    """The settings of the other runtime, refused: none is accepted and then ignored."""
    if config.runtime == "onnx":
        settings = (
            ("--vocoder", config.vocoder),
            ("--set", config.overrides),
            ("--vocoder-batching", config.vocoder_batching != "auto"),
        )
        given = [name for name, value in settings if value]
        if given:
            raise ConfigError(
                f"Expected --runtime onnx without {', '.join(given)}, received: them; an "
                f"exported voice decodes and vocodes as it was exported (xtts-train export "
                f"--format onnx --set decode.KEY=VALUE)"
            )
    elif config.threads is not None:
        raise ConfigError(f"Expected --threads with --runtime onnx, received: --threads "
                          f"{config.threads} with --runtime {config.runtime}, whose programs "
                          f"run on TensorFlow's own thread pools")  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """The HTTP server's limits around an engine.

    Attributes:
        max_queue: requests waiting for a free decoder slot (those decoding not counted);
            one more is answered 503 with `Retry-After`.
        max_upload_mb: the largest body of `POST /v1/voices`, in MiB.
        api_key: every request but `GET /` and `GET /healthz` must send
            `Authorization: Bearer KEY`; None: no key asked for. Left out of the config's repr.
        model_aliases: more names the `model` field may give for the run (`--model-alias`),
            besides those every server answers to (`speech_request.model_names`).
    """

    max_queue: int = 16
    max_upload_mb: float = 10.0
    api_key: str | None = dataclasses.field(default=None, repr=False)
    model_aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_aliases", _strings("model_aliases", self.model_aliases))
        for name in self.model_aliases:
            if not _is_name(name):
                raise ConfigError(f"Expected a model alias (--model-alias) of 1 to "
                                  f"{MAX_NAME_CHARS} printable characters, no space at either "
                                  f"end, received: {name!r}")  # fmt: skip
        _check_int("max_queue", self.max_queue)
        _check_positive("max_upload_mb", self.max_upload_mb)
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key):
            raise ConfigError("Expected api_key a non-empty string or None, received: an empty "
                              "key; leave it out to serve without one")  # fmt: skip

    @property
    def max_upload_bytes(self) -> int:
        """`max_upload_mb` in bytes."""
        return int(self.max_upload_mb * 2**20)


def json_body_limit(max_chars: int) -> int:
    """The largest JSON body of a speech request: 16 KiB for the other fields, and 6 bytes
    a character of text (JSON's longest escape, `\\uXXXX`)."""
    return 16 * 2**10 + 6 * max_chars


def parse_voice_alias(entry: str) -> tuple[str, str]:
    """A `--voice-alias NAME=VOICE`'s name (what a request may give) and voice (the id it
    means), split at the first `=`.

    Raises:
        ConfigError: no `=`, or a side that is empty, over `MAX_NAME_CHARS`, not printable
            or with a space at either end.
    """
    name, equals, voice = str(entry).partition("=")
    if not (isinstance(entry, str) and equals and _is_name(name) and _is_name(voice)):
        raise ConfigError(f"Expected a voice alias NAME=VOICE (--voice-alias), each side 1 to "
                          f"{MAX_NAME_CHARS} printable characters, no space at either end, "
                          f"received: {entry!r}")  # fmt: skip
    return name, voice


def voice_aliases(config: EngineConfig) -> dict[str, str]:
    """{name: voice id}: the aliases of `config.voices`'s `VOICES_FILE` (when the folder holds
    one), and `config.voice_aliases` over them. Whether each voice exists is the voices' to
    check (`VoiceStore`).

    Raises:
        ConfigError: a voices.yaml that is not YAML (or UTF-8), or not a mapping of names to
            voice ids as `parse_voice_alias` takes them.
    """
    aliases = {} if config.voices is None else _aliases_file(config.voices / VOICES_FILE)
    return aliases | dict(parse_voice_alias(entry) for entry in config.voice_aliases)


def _aliases_file(path: Path) -> dict[str, str]:
    """A voices.yaml's {name: voice id}; none when there is no such file."""
    if not path.is_file():
        return {}
    expected = f"Expected {path} a YAML mapping of voice names to voice ids (alloy: amy)"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ConfigError(f"{expected}, received: malformed YAML ({_yaml_problem(error)})"
                          ) from None  # fmt: skip
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{expected}, received: a YAML {type(data).__name__}")
    for name, voice in data.items():
        if not (_is_name(name) and _is_name(voice)):
            raise ConfigError(f"{expected}, each side 1 to {MAX_NAME_CHARS} printable "
                              f"characters, received: the entry {name!r}: {voice!r}")  # fmt: skip
    return dict(data)


def _yaml_problem(error: Exception) -> str:
    """What a YAML (or UTF-8) error says, and where, on one line."""
    mark = getattr(error, "problem_mark", None)
    where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(getattr(error, "problem", None) or error).split()) + where


def _is_name(text: object) -> bool:
    """1 to `MAX_NAME_CHARS` printable characters, no space at either end."""
    return (isinstance(text, str) and 0 < len(text) <= MAX_NAME_CHARS and text.isprintable()
            and text == text.strip())  # fmt: skip


def _strings(name: str, value: object) -> tuple[str, ...]:
    """`value` as a tuple (a lone string refused: it is not a list of them)."""
    if isinstance(value, str):
        raise ConfigError(f"Expected {name} a sequence of strings, received: the string "
                          f"{value!r}; wrap it in a tuple")  # fmt: skip
    return tuple(value)


def _check_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"Expected {name} an int >= 1, received: {name}={value!r}")


def _check_positive(name: str, value: object) -> None:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0):  # fmt: skip
        raise ConfigError(f"Expected {name} a number > 0, received: {name}={value!r}")
