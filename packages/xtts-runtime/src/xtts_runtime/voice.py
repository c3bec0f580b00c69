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
from pathlib import Path

import numpy as np
import onnxruntime as ort

from xtts_data.pieces import TextError, text_pieces
from xtts_data.text import TextConfig, Tokenizer
from xtts_data.voice_folder import FORMAT, VERSION, VoiceFolderError, read_manifest
from xtts_runtime.errors import InputError, VoiceError
from xtts_runtime.loop import Program, Programs, Spoken, conditioning, decode_piece

__all__ = ["FORMAT", "VERSION", "Speech", "Spoken", "Voice", "read_manifest"]


@dataclasses.dataclass(frozen=True)
class Speech:
    """A text spoken: `audio` float32 [samples] in [-1, 1] at `sample_rate`, and each
    piece as decoded (`Spoken`)."""

    audio: np.ndarray
    sample_rate: int
    pieces: list[Spoken]


class Voice:
    """An exported voice folder (`xtts-train export --format onnx`), its programs loaded
    in onnxruntime.

    Args:
        folder: the voice folder.
        threads: onnxruntime's intra-op threads (1: one core, as a server's slot runs).

    Raises:
        VoiceError: not a voice folder, another format or version, or a file missing or
            changed since the export (each named).
    """

    def __init__(self, folder: str | Path, *, threads: int = 1) -> None:
        self.folder = Path(folder)
        try:
            self.manifest = read_manifest(self.folder)
        except VoiceFolderError as error:
            raise VoiceError(str(error)) from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1

        def session(name: str) -> Program:
            return Program(ort.InferenceSession(str(self.folder / f"{name}.onnx"), options,
                                                providers=["CPUExecutionProvider"]))  # fmt: skip

        steps = [session(f"step-{i}") for i in range(len(self.manifest["steps"]))]
        self.programs = Programs(conditioning=session("conditioning"), prefill=session("prefill"),
                                 steps=steps, finish=session("finish"),
                                 vocoder=session("vocoder"))  # fmt: skip
        self.text_config = TextConfig.from_dict(self.manifest["text"], section="text")
        tokenizer = json.loads((self.folder / "tokenizer.json").read_text())
        self.tokenizer = Tokenizer.from_dict(tokenizer)
        self.sample_rate = int(self.manifest["audio"]["sample_rate"])
        reference = self.folder / "reference.npy"
        # The saved clip's voice, computed once: the voice spoken without a reference.
        self.voice = (conditioning(self.programs, self.manifest, np.load(reference))
                      if reference.exists() else None)  # fmt: skip

    def speak(self, text: str, *, language: str | None = None,
              reference: np.ndarray | None = None) -> Speech:  # fmt: skip
        """`text` spoken in the voice of `reference` (None: the run's saved clip).

        Args:
            text: what to say.
            language: a tag of the run's languages (None: the run's default).
            reference: float32 [frames, n_mels], a clip's mel features.

        Raises:
            InputError: nothing to say after normalisation, or a language the run lacks.
            VoiceError: no reference given and the folder holds none.
        """
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
        spoken = [decode_piece(self.programs, self.manifest, voice, p.ids) for p in pieces]
        parts = []
        for piece, said in zip(pieces, spoken, strict=True):
            parts += [said.audio, np.zeros(round(piece.pause * self.sample_rate), np.float32)]
        return Speech(np.concatenate(parts), self.sample_rate, spoken)
