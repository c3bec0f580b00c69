"""`xtts-runtime`: speak an exported voice folder, without TensorFlow.

    xtts-runtime speak VOICE_DIR --text "Hello there." --out hello.wav [--reference clip.wav]

A user error (a folder that is not a voice, a changed file, a text with nothing to say, a
reference that is not audio or gives no voice) prints one line and exits 2; a bug keeps
its traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import soundfile

from xtts_data.errors import XttsDataError
from xtts_runtime.errors import XttsRuntimeError
from xtts_runtime.voice import Voice

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xtts-runtime",
        description="Speak a voice exported by `xtts-train export --format onnx` (with "
        "onnxruntime) or `--format litert` (with LiteRT, the litert extra) and numpy: no "
        "TensorFlow.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    speak = commands.add_parser(
        "speak", help="say a text in an exported voice and write a WAV file",
        description="Say --text in the voice of --reference (default: the run's saved "
        "reference clip): the text cleaned and cut into pieces as the run reads it, each decoded "
        "and vocoded, the pieces joined by their pauses; a 16-bit mono WAV at the run's "
        "sample rate.",
    )  # fmt: skip
    speak.add_argument("voice", type=Path, metavar="VOICE_DIR",
                       help="a folder written by xtts-train export --format onnx or "
                       "litert")  # fmt: skip
    speak.add_argument("--text", required=True, help="what to say")
    speak.add_argument("--out", type=Path, required=True, help="the WAV file to write")
    speak.add_argument("--reference", type=Path,
                       help="a clip of the voice to speak in (WAV, FLAC or OGG at a rate of "
                       "voice.json's clip_rates; at least data.cond_frames of speech)")  # fmt: skip
    speak.add_argument("--language", help="a language tag of the run's (default: the run's)")
    speak.add_argument("--threads", type=int, default=1,
                       help="threads of the vocoder and the other large programs; the "
                       "decoder step runs on one (default: 1)")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.threads < 1:
            raise XttsRuntimeError(f"Expected --threads >= 1, received: {args.threads}")
        started = time.perf_counter()
        voice = Voice(args.voice, threads=args.threads)
        reference = None if args.reference is None else voice.clip(args.reference)
        speech = voice.speak(args.text, language=args.language, reference=reference)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(args.out, speech.audio, speech.sample_rate, subtype="PCM_16")
    except (XttsRuntimeError, XttsDataError) as error:
        print(f"xtts-runtime: error: {error}", file=sys.stderr)
        return 2
    seconds = len(speech.audio) / speech.sample_rate
    took = time.perf_counter() - started
    factor = took / max(seconds, 1e-9)
    print(f"wrote {args.out}: {seconds:.2f} s of audio in {len(speech.pieces)} piece(s), "
          f"{took:.2f} s from start (real-time factor {factor:.3f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
