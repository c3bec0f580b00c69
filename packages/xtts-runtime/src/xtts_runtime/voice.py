"""`Voice`: an exported voice folder, loaded and checked once, that speaks text.

A text goes the way the training side's decodings read it (`xtts_data.pieces`: cleaned,
numbers spelled, phonemes where the run used them, cut into pieces of at most the run's
`decode.split_symbols` symbols, encoded by the run's tokenizer). Each piece is decoded
by `decode_piece` (`loop`) and vocoded whole; the pieces are joined by the silence their
ending calls for (`Encoded.pause`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort

from xtts_audio.config import MelConfig
from xtts_data.clips import (
    BadAudioError,
    ClipError,
    check_clip_audio,
    check_clip_voice,
    check_samples,
    read_clip,
)
from xtts_data.pieces import Encoded, TextError, pause_frames, text_pieces
from xtts_data.text import TextConfig, Tokenizer
from xtts_data.voice_folder import FORMAT, VERSION, VoiceFolderError, read_manifest
from xtts_runtime.errors import InputError, VoiceError
from xtts_runtime.loop import Programs, Spoken, conditioning, decode_piece
from xtts_runtime.programs import AnyProgram, load_program
from xtts_runtime.streaming import stream_piece

__all__ = ["FORMAT", "VERSION", "Speech", "Spoken", "Voice", "read_manifest"]


@dataclasses.dataclass(frozen=True)
class Speech:
    """A text spoken: `audio` float32 [samples] in [-1, 1] at `sample_rate`, and each
    piece as decoded (`Spoken`)."""

    audio: np.ndarray
    sample_rate: int
    pieces: list[Spoken]


def _options(threads: int) -> ort.SessionOptions:
    """A session on `threads` intra-op threads whose idle threads sleep: the loop runs
    Python between calls, where spinning threads would take the cores it needs."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


# A piece spoken, and float32 [samples] of the silence of its pause.
Said = tuple[Spoken, np.ndarray]


class Voice:
    """An exported voice folder (`xtts-train export --format onnx|litert`), its programs
    loaded in onnxruntime or LiteRT (`programs`).

    Args:
        folder: the voice folder.
        threads: the threads of the programs with large ops (the vocoder, finish, prefill,
            clips); a decoder step runs on one, its ops too small to split (measured: two
            threads made the step slower).

    Raises:
        VoiceError: not a voice folder, another format or version, a file missing or
            changed since the export (each named), or a LiteRT folder without
            ai-edge-litert.
    """

    def __init__(self, folder: str | Path, *, threads: int = 1) -> None:
        self.folder = Path(folder)
        try:
            self.manifest = read_manifest(self.folder)
        except VoiceFolderError as error:
            raise VoiceError(str(error)) from None
        self._options, self._threads = [_options(threads), _options(1)], threads
        session = self._session
        steps = [session(f"step-{i}", alone=True) for i in range(len(self.manifest["steps"]))]
        self.programs = Programs(features=session("features"),
                                 conditioning=session("conditioning"), prefill=session("prefill"),
                                 steps=steps, finish=session("finish"),
                                 vocoder=session("vocoder"),
                                 window=session("window", alone=True)
                                 if self.manifest.get("chunk_frames") else None)  # fmt: skip
        self.text_config = TextConfig.from_dict(self.manifest["text"], section="text")
        tokenizer = json.loads((self.folder / "tokenizer.json").read_text())
        self.tokenizer = Tokenizer.from_dict(tokenizer)
        self.audio = MelConfig.from_dict(self.manifest["audio"], section="audio")
        self.sample_rate = self.audio.sample_rate
        self._later: dict[str, AnyProgram] = {}  # by name: a clip's rate, a rate out, once asked
        reference = self.folder / "reference.npy"
        # The saved clip's voice, computed once: the voice spoken without a reference.
        self.voice = (conditioning(self.programs, self.manifest, np.load(reference))
                      if reference.exists() else None)  # fmt: skip

    def program(self, name: str) -> AnyProgram:
        """The folder's program `name` (`{name}.onnx` or `.tflite`) on one thread, loaded
        now."""
        return self._session(name, alone=True)

    def _program(self, name: str) -> AnyProgram:
        """The program `name`, loaded the first time it is asked for."""
        if name not in self._later:
            self._later[name] = self._session(name)
        return self._later[name]

    def _session(self, name: str, *, alone: bool = False) -> AnyProgram:
        """The program `name`, on one thread when `alone` (`_options`)."""
        return load_program(self.folder, self.manifest, name, options=self._options[alone],
                            threads=1 if alone else self._threads)  # fmt: skip

    @property
    def loaded(self) -> int:
        """Programs loaded: the steps, conditioning, features, prefill, finish, vocoder,
        the stream's window, and those of the clips' rates and the rates out asked for so
        far."""
        window = self.programs.window is not None
        return len(self.programs.steps) + 5 + window + len(self._later)

    def clip(self, path: str | Path, *, max_seconds: float | None = None) -> np.ndarray:
        """The mel features of the reference clip at `path` (WAV, FLAC, OGG) as the run
        reads one (`xtts-train synthesize --reference`): mono, resampled to the run's rate,
        its silence trimmed, its first `cond_frames` frames; a `reference` for `speak`.

        Args:
            path: the clip.
            max_seconds: the longest clip taken (a server's bound on uploads); None: any.

        Raises:
            InputError: not audio, a rate the voice was not exported for (the rates
                named), longer than `max_seconds`, silent, or too short once trimmed (each
                naming the clip).
        """
        try:
            audio, rate = read_clip(Path(path))
        except BadAudioError as error:
            raise InputError(f"Expected an audio clip (WAV, FLAC or OGG), received: {path}, "
                             f"which does not decode as audio ({error})") from None  # fmt: skip
        rates = self.manifest["clip_rates"]
        if rate not in rates:
            raise InputError(
                f"Expected a clip at one of {rates} Hz, received: {path} at {rate} Hz; "
                f"resample it (sox IN -r {self.sample_rate} OUT)"
            )
        read = self._program(f"clip-{rate}")({"audio": audio})
        wave, (start, end) = read["wave"], read["bounds"]
        try:
            check_clip_audio(str(path), seconds=len(wave) / self.sample_rate,
                             peak=float(np.abs(wave).max()), max_seconds=max_seconds)  # fmt: skip
            check_samples(int(end - start), self.audio)
            mel = self.programs.features({"wave": wave[start:end]})["mel"]
            check_clip_voice(str(path), frames=len(mel), need=self.manifest["min_reference_frames"],
                             top_db=self.manifest["trim_top_db"], config=self.audio)  # fmt: skip
        except (ClipError, BadAudioError) as error:
            raise InputError(str(error)) from None
        return mel[: self.manifest["cond_frames"]]

    def resample(self, samples: np.ndarray, rate: int) -> np.ndarray:
        """float32 [samples] at the voice's rate, resampled to `rate` (`resample-{rate}`,
        written for the rates an encoder needs: `out_rates` of voice.json).

        Raises:
            VoiceError: a rate the voice was not exported to (those it was named).
        """
        rates = self.manifest.get("out_rates", [])
        if rate not in rates:
            raise VoiceError(f"Expected a rate the voice was exported to, one of {rates} Hz, "
                             f"received: {rate} Hz")  # fmt: skip
        return self._program(f"resample-{rate}")({"wave": samples})["audio"]

    def speak(self, text: str, *, language: str | None = None,
              reference: np.ndarray | None = None) -> Speech:  # fmt: skip
        """`text` spoken in the voice of `reference` (None: the run's saved clip): the
        pieces of `stream`, joined.

        Args:
            text: what to say.
            language: a tag of the run's languages (None: the run's default).
            reference: float32 [frames, n_mels], a clip's mel features (`clip`).

        Raises:
            InputError: nothing to say after normalisation, or a language the run lacks.
            VoiceError: no reference given and the folder holds none.
        """
        spoken = list(self.stream(text, language=language, reference=reference))
        audio = np.concatenate([part for said, pause in spoken for part in (said.audio, pause)])
        return Speech(audio, self.sample_rate, [said for said, _ in spoken])

    def stream(self, text: str, *, language: str | None = None,
               reference: np.ndarray | None = None) -> Iterator[Said]:  # fmt: skip
        """`text`'s pieces spoken in turn, each as soon as it is decoded and vocoded: the
        first can play while the rest is decoded. The text is checked before the first.

        Args:
            text, language, reference: as `speak`'s.

        Returns:
            (the piece, float32 [samples] of its pause's silence) for each piece in order.

        Raises:
            InputError, VoiceError: as `speak`'s, when called (before anything is decoded).
        """
        return self._spoken(*self._read(text, language, reference))

    def chunks(self, text: str, *, language: str | None = None,
               reference: np.ndarray | None = None) -> Iterator[np.ndarray]:  # fmt: skip
        """`text`'s audio, float32 [samples] chunks as the decoder steps: with the folder's
        `window` program, `chunk_frames` frames at a time (the first long before its piece
        is decoded; `streaming.PieceStream`), else a piece at a time; each piece's pause
        after it. Joined: `speak`'s audio up to float rounding.

        Args, Raises: as `stream`'s.
        """
        return self._chunked(*self._read(text, language, reference))

    def _read(self, text: str, language: str | None,
              reference: np.ndarray | None) -> tuple[list[Encoded], dict]:  # fmt: skip
        """`text`'s pieces and the voice they are spoken in (`stream`'s checks)."""
        if reference is None and self.voice is None:
            raise VoiceError(f"{self.folder} holds no reference.npy: give a reference")
        try:
            pieces = text_pieces(text, self.text_config, self.tokenizer, name="the text",
                                 language=language,
                                 max_symbols=self.manifest["split_symbols"])  # fmt: skip
        except TextError as error:
            raise InputError(str(error)) from None
        voice = self.voice if reference is None else conditioning(self.programs, self.manifest,
                                                                  reference)  # fmt: skip
        return pieces, voice

    def pause(self, piece: Encoded) -> np.ndarray:
        """float32 [samples] of the silence after `piece` (its ending's, `Encoded.pause`)."""
        return np.zeros(pause_frames(piece.pause, self.audio) * self.audio.hop_length, np.float32)

    def _spoken(self, pieces: list[Encoded], voice: dict) -> Iterator[Said]:
        for piece in pieces:
            yield decode_piece(self.programs, self.manifest, voice, piece.ids), self.pause(piece)

    def _chunked(self, pieces: list[Encoded], voice: dict) -> Iterator[np.ndarray]:
        for piece in pieces:
            if self.programs.window is None:
                yield decode_piece(self.programs, self.manifest, voice, piece.ids).audio
            else:
                yield from stream_piece(self.programs, self.manifest, voice, piece.ids)
            if piece.pause:
                yield self.pause(piece)
