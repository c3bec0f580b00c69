"""`xtts-bench`: side-by-side measurements of the xtts packages against what they replace."""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads

from xtts_bench.audio import AudioBenchConfig, format_table, run_audio_benchmarks


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xtts-bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    audio = commands.add_parser(
        "audio",
        help="xtts-audio vs librosa and tf.audio.decode_wav (mel, end to end, decode)",
        description=(
            "Measure, side by side in this process, seconds of audio processed per wall "
            "second: batched XLA mel vs librosa per file; WAV files to mel through tf.data vs "
            "librosa.load + melspectrogram; decode_wav vs tf.audio.decode_wav."
        ),
    )
    defaults = AudioBenchConfig()
    audio.add_argument(
        "--clips", type=int, default=defaults.clips, help="utterances (default: %(default)s)"
    )
    audio.add_argument(
        "--min-seconds",
        type=float,
        default=defaults.min_seconds,
        help="shortest clip (default: %(default)s)",
    )
    audio.add_argument(
        "--max-seconds",
        type=float,
        default=defaults.max_seconds,
        help="longest clip (default: %(default)s)",
    )
    audio.add_argument(
        "--batch-size",
        type=int,
        default=defaults.batch_size,
        help="clips per XLA batch (default: %(default)s)",
    )
    audio.add_argument(
        "--rounds",
        type=int,
        default=defaults.rounds,
        help="timed rounds per side; the median is reported (default: %(default)s)",
    )
    audio.add_argument(
        "--threads",
        type=int,
        default=defaults.threads,
        help="TensorFlow intra/inter-op threads (default: %(default)s)",
    )
    audio.add_argument(
        "--preset", default=defaults.preset, help="mel recipe (default: %(default)s)"
    )
    audio.add_argument(
        "--json", action="store_true", help="print the figures as JSON instead of a table"
    )
    return parser  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `xtts-bench` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        bench = AudioBenchConfig(
            clips=args.clips, min_seconds=args.min_seconds, max_seconds=args.max_seconds,
            batch_size=args.batch_size, rounds=args.rounds, threads=args.threads,
            preset=args.preset,
        )  # fmt: skip
        results = run_audio_benchmarks(bench)
    except ValueError as error:  # bad settings (including an unknown preset)
        print(f"xtts-bench: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(results, indent=2) if args.json else format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
