"""The voices a server speaks in: the run's own reference, a folder's clips named at
start-up, and clips uploaded while it runs, each conditioned on once and kept by id; and
the aliases a request may name them by (OpenAI's voice names, `--voice-alias`).

Uploads live in memory only, in a bounded least-recently-used store: a restart forgets
them, and past `max_uploads` the one used longest ago is dropped. A clip is read by the
engine's runtime (`ReadClip`: TensorFlow's `load_reference`, as `xtts-train synthesize
--reference` reads it, or an exported voice's `Voice.clip`): decodable, not silent, long
enough and, here, not longer than a bound; no message names a path on the server.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import secrets
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from xtts_serve.config import MAX_NAME_CHARS, EngineConfig, voice_aliases
from xtts_serve.errors import ConfigError, RequestError, UnknownVoiceError
from xtts_serve.openai_names import OPENAI_VOICES

__all__ = [
    "CLIP_SUFFIXES",
    "RUN_VOICE",
    "ReadClip",
    "Voice",
    "VoiceStore",
    "builtin_voices",
    "check_name",
    "folder_voices",
    "hide_path",
    "load_voices",
    "upload_reference",
]

# The clip at a path → float32 [frames, n_mels], its conditioning mel, as the engine's
# runtime reads a reference; keywords: `shown`, what messages call the clip (never a server
# path for an upload), and `max_seconds`, the longest clip taken. Raises RequestError: not
# audio, too long, silent or too short (each naming what was expected).
ReadClip = Callable[..., np.ndarray]

_log = logging.getLogger(__name__)

RUN_VOICE = "run"  # the id of the run's own voice (the reference clip `fit` saved)
CLIP_SUFFIXES = (".wav", ".flac", ".ogg")  # what `--voices DIR` reads


@dataclasses.dataclass(frozen=True)
class Voice:
    """A voice a request may name by `id`.

    Attributes:
        id: what a request names (`voice`); an upload's is random, opaque.
        name: shown in the list (an upload's own, a folder clip's stem, or "run").
        source: "run", "folder" or "upload".
        reference: float32 [frames, n_mels], the mel the model conditions on.
    """

    id: str
    name: str
    source: str
    reference: np.ndarray = dataclasses.field(repr=False, compare=False)

    def to_dict(self) -> dict[str, str]:
        """What `GET /v1/audio/voices` shows of it."""
        return {"id": self.id, "name": self.name, "source": self.source}


class VoiceStore:
    """The voices of a running server: those it started with, their aliases, and uploads
    kept least recently used first out past `max_uploads`. Safe to use from several threads.

    Every name a request may give is resolved here (`get`): the HTTP routes, the page (through
    `GET /v1/audio/voices`) and `Engine.prepare` all read it.

    Args:
        builtin: the voices it starts with (never dropped, never deleted).
        max_uploads: uploads kept at once.
        aliases: {name: voice id} of `builtin` (`voice_aliases`); over them, each of
            `OPENAI_VOICES` that is no voice's id names the `default` voice.

    Raises:
        ConfigError: an alias named as a voice (it would hide it), or one to no voice of
            `builtin`.
    """

    def __init__(self, builtin: Sequence[Voice], *, max_uploads: int,
                 aliases: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self._builtin = {voice.id: voice for voice in builtin}
        self._aliases = _alias_table(aliases or {}, voices=list(self._builtin),
                                     default=self.default)  # fmt: skip
        self._uploads: collections.OrderedDict[str, Voice] = collections.OrderedDict()
        self._max_uploads, self._lock = max_uploads, threading.Lock()

    @property
    def default(self) -> str | None:
        """The voice of a request that names none: the run's own, if it saved one."""
        return RUN_VOICE if RUN_VOICE in self._builtin else None

    @property
    def aliases(self) -> dict[str, str]:
        """{name: voice id}: every alias `get` takes (`GET /v1/audio/voices` lists them)."""
        return dict(self._aliases)

    def get(self, voice_id: str) -> Voice:
        """The voice `voice_id` names: an upload's (it counts as used now), one the server
        started with, or the one an alias names.

        Raises:
            UnknownVoiceError: no such voice or alias (400), naming the ones there are.
        """
        with self._lock:
            if voice_id in self._uploads:
                self._uploads.move_to_end(voice_id)
                return self._uploads[voice_id]
        voice = self._builtin.get(self._aliases.get(voice_id, voice_id))  # fixed at start-up
        if voice is not None:
            return voice
        aliases = f", an alias ({sorted(self._aliases)})" if self._aliases else ""
        raise UnknownVoiceError(
            f"Expected voice one of {sorted(self._builtin)}{aliases} or an uploaded voice's id "
            f"(GET /v1/audio/voices lists them), received: {voice_id!r}; uploads are forgotten "
            f"on a restart or when more than the newest ones kept arrive"
        )

    def add(self, reference: np.ndarray, *, name: str | None = None) -> Voice:
        """Keep an uploaded voice under a new random id, dropping the least recently used
        upload past `max_uploads`."""
        voice_id = f"voice-{secrets.token_urlsafe(12)}"
        voice = Voice(voice_id, name or voice_id, "upload", reference)
        with self._lock:
            self._uploads[voice_id] = voice
            while len(self._uploads) > self._max_uploads:
                self._uploads.popitem(last=False)
        return voice

    def remove(self, voice_id: str) -> Voice:
        """Forget an uploaded voice.

        Raises:
            RequestError: `voice_id` is one the server started with (400).
            UnknownVoiceError: no such upload (404).
        """
        with self._lock:
            if voice_id in self._builtin or voice_id in self._aliases:
                raise RequestError(f"Expected the id of an uploaded voice, received: "
                                   f"{voice_id!r}, one the server started with (a voice or "
                                   f"an alias)")  # fmt: skip
            voice = self._uploads.pop(voice_id, None)
        if voice is None:
            raise UnknownVoiceError(f"Expected the id of an uploaded voice, received: "
                                    f"{voice_id!r}, which names none", status=404)  # fmt: skip
        return voice

    def list(self) -> list[Voice]:
        """Every voice: those it started with, then uploads, least recently used first."""
        with self._lock:
            return [*self._builtin.values(), *self._uploads.values()]


def _alias_table(aliases: Mapping[str, str], *, voices: Sequence[str],
                 default: str | None) -> dict[str, str]:  # fmt: skip
    """{name: voice id}: each of `OPENAI_VOICES` that is none of `voices` to `default` (none
    without one), and `aliases` over them.

    Raises:
        ConfigError: an alias named as one of `voices`, or one to none of them.
    """
    hiding = sorted(set(aliases) & set(voices))
    if hiding:
        raise ConfigError(f"Expected voice aliases named other than the voices {list(voices)}, "
                          f"received: {hiding}, which would hide them; rename the alias "
                          f"(--voice-alias or the folder's voices.yaml)")  # fmt: skip
    missing = {name: voice for name, voice in aliases.items() if voice not in voices}
    if missing:
        raise ConfigError(f"Expected voice aliases to voices the server starts with "
                          f"{list(voices)}, received: {missing}; an alias names the run's "
                          f"voice ({RUN_VOICE!r}) or a --voices clip's stem")  # fmt: skip
    table = {} if default is None else {n: default for n in OPENAI_VOICES if n not in voices}
    return table | dict(aliases)


def check_name(name: str | None) -> None:
    """An upload's name: None, or 1 to `MAX_NAME_CHARS` printable characters.

    Raises:
        RequestError: another name.
    """
    if name is not None and not (len(name.strip()) > 0 and len(name) <= MAX_NAME_CHARS
                                 and name.isprintable()):  # fmt: skip
        raise RequestError(f"Expected name 1 to {MAX_NAME_CHARS} printable characters, "
                           f"received: {name[:MAX_NAME_CHARS + 1]!r}")  # fmt: skip


def upload_reference(data: bytes, *, read: ReadClip, max_seconds: float,
                     workspace: Path) -> np.ndarray:  # fmt: skip
    """`read` of uploaded bytes, written for the decoders to a file of its own in
    `workspace` (removed after) and called "the uploaded clip" in messages.

    Raises:
        RequestError: as `read`, and an empty upload.
    """
    if not data:
        raise RequestError("Expected an audio clip (WAV, FLAC or OGG) in the field `file`, "
                           "received: 0 bytes")  # fmt: skip
    with tempfile.NamedTemporaryFile(dir=workspace, suffix=".clip") as clip:
        clip.write(data)
        clip.flush()
        return read(Path(clip.name), shown="the uploaded clip", max_seconds=max_seconds)


def load_voices(config: EngineConfig, *, own: np.ndarray | str, read: ReadClip) -> VoiceStore:
    """The voices a server starts with (`builtin_voices`) and their aliases
    (`voice_aliases`: the folder's voices.yaml and `config.voice_aliases`), in a store
    of `config.max_voices` uploads.

    Raises:
        ConfigError: as `builtin_voices` and `voice_aliases`; an alias named as a voice, or
            one to no voice.
    """
    aliases = voice_aliases(config)  # a malformed voices.yaml before the clips decode
    return VoiceStore(builtin_voices(config, own=own, read=read), max_uploads=config.max_voices,
                      aliases=aliases)  # fmt: skip


def builtin_voices(config: EngineConfig, *, own: np.ndarray | str,
                   read: ReadClip) -> list[Voice]:  # fmt: skip
    """The voices a server starts with: the run's own (`RUN_VOICE`: `own`, the mel of the
    reference clip `fit` saved, or why there is none) and the `config.voices` folder's,
    each read by `read`.

    Raises:
        ConfigError: the run saved no reference and no folder is given, or `folder_voices`
            refuses the folder.
    """
    voices = []
    if isinstance(own, str):
        if config.voices is None:
            raise ConfigError(f"Expected a run with its saved reference clip, or --voices "
                              f"DIR, received: {own}")  # fmt: skip
        _log.warning("no voice of the run's own: %s", own)
    else:
        voices.append(Voice(RUN_VOICE, RUN_VOICE, "run", own))
    if config.voices is not None:
        voices += folder_voices(config.voices, read=read, max_seconds=config.max_clip_seconds)
    return voices


def folder_voices(folder: Path, *, read: ReadClip, max_seconds: float) -> list[Voice]:
    """A voice of each clip in `folder` (its `CLIP_SUFFIXES` files), named by its stem.

    Raises:
        ConfigError: not a folder, no clip in it, a stem that is the run's voice's id, or
            a clip `read` refuses (naming the file).
    """
    if not folder.is_dir():
        raise ConfigError(f"Expected --voices a folder of clips, received: {folder}, "
                          f"which is not a folder")  # fmt: skip
    clips = sorted(p for p in folder.iterdir() if p.suffix.lower() in CLIP_SUFFIXES)
    if not clips:
        raise ConfigError(f"Expected --voices a folder with {', '.join(CLIP_SUFFIXES)} "
                          f"clips, received: {folder}, which holds none")  # fmt: skip
    voices = []
    for clip in clips:
        if clip.stem == RUN_VOICE or len(clip.stem) > MAX_NAME_CHARS:
            raise ConfigError(f"Expected --voices clips named other than {RUN_VOICE!r} (the "
                              f"run's own voice) in at most {MAX_NAME_CHARS} characters, "
                              f"received: {clip}")  # fmt: skip
        try:
            reference = read(clip, shown=str(clip), max_seconds=max_seconds)
        except RequestError as error:
            raise ConfigError(f"--voices: {error}") from None
        voices.append(Voice(clip.stem, clip.stem, "folder", reference))
    return voices


def hide_path(error: Exception, path: Path, shown: str) -> str:
    """`error`'s message with the clip's path replaced by `shown`."""
    return str(error).replace(str(path), shown)
