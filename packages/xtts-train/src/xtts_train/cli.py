"""`xtts-train`: train the text-to-mel model on a feature cache, compiled once per shape.

User errors (bad config, unknown key, missing cache, a retrace after warm-up) print one
line and exit 2; real bugs keep their traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from pathlib import Path

from xtts_audio import XttsAudioError
from xtts_data import XttsDataError
from xtts_train.config import load_stack_config
from xtts_train.errors import XttsTrainError
from xtts_train.trainer import fit

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xtts-train",
        description="Train an XTTS-style text-to-mel model on an xtts-data feature cache, "
        "with one XLA-compiled step per static batch shape.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fit_parser = commands.add_parser(
        "fit", help="train (or resume) on a feature cache",
        description="Compile the train step for every batch shape of the cache's pipeline, "
        "then train to --steps, writing metrics.jsonl, TensorBoard events, checkpoints "
        "and summary.json to the work dir. Run the same command again to resume from the "
        "last checkpoint; SIGINT/SIGTERM save one before exiting.",
    )  # fmt: skip
    fit_parser.add_argument("--data", type=Path, required=True, metavar="CACHE",
                            help="feature cache (xtts-data prepare output)")  # fmt: skip
    fit_parser.add_argument("--workdir", type=Path, required=True, metavar="RUN",
                            help="run folder: metrics, checkpoints, summary")  # fmt: skip
    fit_parser.add_argument("--config", type=Path,
                            help="YAML with sections audio, data, model, train")  # fmt: skip
    fit_parser.add_argument(
        "--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable), e.g. train.steps=500",
    )  # fmt: skip
    fit_parser.add_argument("--steps", type=int, help="total steps (same as --set train.steps=N)")
    fit_parser.add_argument(
        "--allow-retrace", action="store_true",
        help="warn instead of stopping when a batch shape was not compiled",
    )  # fmt: skip
    fit_parser.add_argument("--quiet", action="store_true", help="no progress output")
    return parser


def _run_fit(args) -> int:
    stack = load_stack_config(args.config, args.set)
    train = stack.train
    if args.steps is not None:
        train = dataclasses.replace(train, steps=args.steps)
    if args.allow_retrace:
        train = dataclasses.replace(train, allow_retrace=True)
    summary = fit(dataclasses.replace(stack, train=train), args.data, args.workdir,
                  progress=not args.quiet)  # fmt: skip
    print(json.dumps(summary, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `xtts-train` console script."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return {"fit": _run_fit}[args.command](args)
    except (XttsTrainError, XttsDataError, XttsAudioError) as error:
        print(f"xtts-train {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
