"""The engine's and the server's settings: frozen, keyword-only, checked when made.

Standard library only: the console script checks its flags before TensorFlow loads.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from xtts_serve.errors import ConfigError

__all__ = ["ENV_API_KEY", "VOCODER_BATCHING", "EngineConfig", "ServerConfig", "json_body_limit"]

ENV_API_KEY = "XTTS_SERVE_API_KEY"  # the API key's environment variable (`--api-key`)
VOCODER_BATCHING = ("auto", "on", "off")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """What an `Engine` loads and the limits of what it speaks.

    Attributes:
        run: a text-to-mel training run (`xtts-train fit`).
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "run", Path(self.run))
        for name in ("vocoder", "voices"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, Path(value))
        object.__setattr__(self, "overrides", tuple(self.overrides))
        _check_int("max_chars", self.max_chars)
        _check_int("max_voices", self.max_voices)
        _check_int("slots", self.slots)
        _check_positive("max_clip_seconds", self.max_clip_seconds)
        if self.vocoder_batching not in VOCODER_BATCHING:
            raise ConfigError(f"Expected vocoder_batching one of {list(VOCODER_BATCHING)}, "
                              f"received: {self.vocoder_batching!r}")  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """The HTTP server's limits around an engine.

    Attributes:
        max_queue: requests waiting for a free decoder slot (those decoding not counted);
            one more is answered 503 with `Retry-After`.
        max_upload_mb: the largest body of `POST /v1/voices`, in MiB.
        api_key: every request but `GET /` and `GET /healthz` must send
            `Authorization: Bearer KEY`; None: no key asked for. Left out of the config's repr.
    """

    max_queue: int = 16
    max_upload_mb: float = 10.0
    api_key: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
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


def _check_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"Expected {name} an int >= 1, received: {name}={value!r}")


def _check_positive(name: str, value: object) -> None:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0):  # fmt: skip
        raise ConfigError(f"Expected {name} a number > 0, received: {name}={value!r}")
