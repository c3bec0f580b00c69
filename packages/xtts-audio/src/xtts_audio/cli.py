"""`xtts-audio demo`: the whole chain on one utterance, timed, with audio you can listen to.

decode → mono → resample → trim → mel features (XLA) → Griffin-Lim → WAV
(`xtts_audio.demo`). User errors (a missing or undecodable `--input`, an output folder
that cannot be written) print one line and exit 2 (`xtts_audio.cli_runner`); bugs keep
their traceback. TensorFlow's start-up notices are kept off stderr
(`xtts_audio.startup.quiet_tensorflow`); `--verbose` shows them.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
from typing import TYPE_CHECKING

from xtts_audio.cli_runner import run_command
from xtts_audio.config import PRESETS
from xtts_audio.errors import XttsAudioError
from xtts_audio.startup import start_cli, verbose_flag

if TYPE_CHECKING:
    import tensorflow as tf

__all__ = ["main"]

# OSError: the user's --input or --out cannot be read or written.
_USER_ERRORS = (XttsAudioError, OSError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xtts-audio",
        description="TensorFlow-native audio ops for TTS that match librosa.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        parents=[verbose_flag()],
        help="run decode → resample → trim → mel → Griffin-Lim on one utterance",
        description=(
            "Decode a WAV (default: a synthetic 44.1 kHz stereo utterance written first), "
            "downmix, resample to the preset's rate, trim silence, compute mel features "
            "under XLA, reconstruct audio with Griffin-Lim and write it next to the input."
        ),
    )
    demo.add_argument(
        "--input", type=pathlib.Path, help="a WAV file to use instead of the synthetic one"
    )
    demo.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path("xtts-demo"),
        help="output folder (default: %(default)s)",
    )
    demo.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="xtts",
        help="mel recipe (default: %(default)s)",
    )
    demo.add_argument(
        "--iterations", type=int, default=32, help="Griffin-Lim iterations (default: %(default)s)"
    )
    demo.add_argument(
        "--top-db",
        type=float,
        default=40.0,
        help="silence threshold for trimming (default: %(default)s)",
    )
    return parser  # fmt: skip


def _run_demo(args: argparse.Namespace) -> int:
    if args.input is not None and not args.input.is_file():
        raise XttsAudioError(f"no such file: {args.input}")
    # Imported here, not at the top: parsing (and `--help`) must not load TensorFlow, which
    # takes seconds, and the console script quiets TensorFlow first. Not an import cycle.
    import tensorflow as tf

    from xtts_audio.demo import run_demo

    lines = run_demo(source=args.input, out=args.out, preset=args.preset,
                     iterations=args.iterations, top_db=args.top_db)  # fmt: skip
    try:
        for line in lines:
            print(line, flush=True)
    except tf.errors.InvalidArgumentError as error:
        if args.input is None:  # the synthetic utterance: a bug, keep its traceback
            raise
        raise XttsAudioError(f"cannot read {args.input}: {_reason(error)}") from None
    return 0


def _reason(error: tf.errors.InvalidArgumentError) -> str:
    """The decoder's own message, without TensorFlow's graph traceback around it."""
    found = re.search(r"assertion failed: \[(.*?)\]", error.message)
    return found.group(1) if found else error.message.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `xtts-audio` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    start_cli(verbose=args.verbose, console=argv is None)
    return run_command(_run_demo, args, prog="xtts-audio", user_errors=_USER_ERRORS)


if __name__ == "__main__":
    sys.exit(main())
