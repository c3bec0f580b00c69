"""`xtts-bench hlo`: its parser and handler (no TensorFlow until a command runs)."""

from __future__ import annotations

import argparse
import json
import pathlib

from xtts_audio.startup import verbose_flag

__all__ = ["add_hlo_parser", "run_hlo"]


def add_hlo_parser(commands) -> argparse.ArgumentParser:
    """`hlo export` and `hlo predict` under `commands` (the CLI's subparsers); returns the
    export parser, to which the CLI adds its `--set` (dest `overrides`)."""
    hlo = commands.add_parser(
        "hlo", parents=[verbose_flag()],
        help="a run's compiled programs as HLO protos, timed by jaxlib's XLA",
        description="Export the XLA programs a run compiles (HLO protos, a manifest and a "
        "standalone runner) for a machine with jax but no TensorFlow.",
    )  # fmt: skip
    sub = hlo.add_subparsers(dest="hlo_command", required=True)
    p = sub.add_parser(
        "export", parents=[verbose_flag()],
        help="write a run's train, eval and decoding programs as HLO protos, a manifest "
        "and runner.py",
        description=(
            "Build the programs a run compiles as fit, evaluate and synthesize build them "
            "(train.compiler=xla): each bucket shape's train and eval step and, for a "
            "text-to-mel run, the decoding of the longest bucket's text into a buffer of "
            "twice its frames; write into --out each one's HloModuleProto (lowered for this CPU), "
            "manifest.json (parameters with roles, shapes, dtypes and fill rules; outputs; "
            "the updated variables' aliases) and runner.py, which compiles and times them "
            "with jax alone: python OUT/runner.py OUT [--steps N] [--peak-tflops T]."
        ),
    )  # fmt: skip
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=pathlib.Path, metavar="CACHE",
                        help="a prepared feature cache: its pipeline's bucket shapes")  # fmt: skip
    source.add_argument("--ljspeech", action="store_true",
                        help="the bucket shapes planned for LJSpeech's lengths (no cache; "
                        "set model.vocab_size with --set)")  # fmt: skip
    p.add_argument("--config", type=pathlib.Path, default=None, help="stack config (a recipe)")
    p.add_argument("--out", type=pathlib.Path, required=True, metavar="DIR",
                   help="the folder written: protos, manifest.json, runner.py")  # fmt: skip
    p.add_argument(
        "--bucket",
        type=int,
        action="append",
        default=None,
        help="export only this bucket (index into the spec's shapes; repeatable)",
    )
    p.add_argument(
        "--program",
        action="append",
        default=None,
        dest="kinds",
        metavar="KIND",
        help="export only this kind of program: train, eval or decode (repeatable; "
        "default: all three)",
    )
    p.add_argument(
        "--decode-batch",
        type=int,
        default=8,
        metavar="ROWS",
        help="rows of the decoding program (default: 8, as evaluate decodes)",
    )
    p.add_argument("--inputs", action="store_true",
                   help="also write each program's parameters (a real batch, the initial "
                   "state) for a check against TensorFlow")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    _add_predict(sub)
    return p


def _add_predict(sub) -> None:
    p = sub.add_parser(
        "predict", parents=[verbose_flag()],
        help="predict how busy the device stays, from its step times and the input "
        "pipeline's CPU cost",
        description=(
            "Predict the device-busy fraction of a run from two measurements made apart: "
            "the device's step time of each bucket's train program (runner.py DIR --json "
            "on the device) and the input pipeline's CPU cost (xtts-data doctor --json on "
            "the host). Each bucket is weighted by its share of an epoch's batches (the "
            "export's manifest), the pipeline's cost by the batch's real frames, and the "
            "cores are assumed to scale linearly. A prediction: host-device copies and "
            "TensorFlow's per-step overhead are left out."
        ),
    )  # fmt: skip
    p.add_argument("export", type=pathlib.Path, metavar="DIR",
                   help="the export folder (its manifest.json)")  # fmt: skip
    p.add_argument("results", type=pathlib.Path, metavar="RESULTS",
                   help="the runner's JSON from the device (runner.py DIR --json)")  # fmt: skip
    p.add_argument("--doctor", type=pathlib.Path, required=True, metavar="REPORT",
                   help="xtts-data doctor --json of the run's pipeline on the host")  # fmt: skip
    p.add_argument("--cores", type=int, nargs="+", default=[1, 2, 4, 8, 16], metavar="N",
                   help="host cores to predict for (default: 1 2 4 8 16)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the prediction as JSON")


def _read_json(path: pathlib.Path, what: str) -> dict:
    """A JSON file's object, or one line saying what is wrong with it."""
    from xtts_bench.errors import SettingsError

    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SettingsError(f"Expected {what} at {path}, received: {error}") from None


def run_hlo(args: argparse.Namespace) -> str | dict:
    """Run `hlo export` (the summary table, or the manifest with `--json`) or `hlo predict`
    (the prediction's table, or its JSON)."""
    if args.hlo_command == "predict":
        return _run_predict(args)
    from xtts_bench.hlo.export import export_hlo, format_export
    from xtts_bench.hlo.programs import KINDS, ExportConfig

    config = ExportConfig(out=args.out, config=args.config, overrides=tuple(args.overrides),
                          data=args.data, ljspeech=args.ljspeech,
                          buckets=None if args.bucket is None else tuple(args.bucket),
                          kinds=tuple(args.kinds or KINDS), decode_batch=args.decode_batch,
                          inputs=args.inputs)  # fmt: skip
    manifest = export_hlo(config)
    return manifest if args.json else format_export(manifest, args.out)


def _run_predict(args: argparse.Namespace) -> str | dict:
    from xtts_bench.hlo.predict import format_prediction, predict_busy

    prediction = predict_busy(
        _read_json(args.export / "manifest.json", "an xtts-bench hlo export's manifest"),
        _read_json(args.results, "the runner's --json output"),
        _read_json(args.doctor, "an xtts-data doctor --json report"),
        cores=args.cores,
    )
    return prediction if args.json else format_prediction(prediction)
