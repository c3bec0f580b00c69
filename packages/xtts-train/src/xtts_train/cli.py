"""`xtts-train`: train the text-to-mel model or the vocoder on a feature cache, compiled
once per shape.

User errors (bad config, unknown key, missing cache, a retrace after warm-up) print one
line and exit 2; real bugs keep their traceback (`xtts_audio.cli_runner`). Parsing (and
`--help`) loads no TensorFlow; the console script then turns on the persistent compile cache
(`xtts_train.compile.compile_cache`; `--no-compile-cache` or `XTTS_COMPILE_CACHE=off` turn it
off) and keeps TensorFlow's start-up notices off stderr (`--verbose` shows them).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from xtts_audio.cli_runner import run_command
from xtts_audio.errors import XttsAudioError
from xtts_audio.startup import start_cli, verbose_flag
from xtts_data.errors import XttsDataError
from xtts_train.compile import compile_cache
from xtts_train.config import STRATEGIES
from xtts_train.errors import XttsTrainError

__all__ = ["main"]

_USER_ERRORS = (XttsTrainError, XttsDataError, XttsAudioError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xtts-train",
        description="Train the autoregressive text-to-mel model, or the vocoder that turns its "
        "mels into audio, on an xtts-data feature cache, with one compiled step per static "
        "batch shape.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fit_parser = commands.add_parser(
        "fit", help="train (or resume) on a feature cache", parents=_common(),
        description="Compile the train step for every batch shape of the cache's pipeline, "
        "then train to --steps, writing metrics.jsonl, TensorBoard events, checkpoints "
        "and summary.json to the work dir. Run the same command again to resume from the "
        "last checkpoint; SIGINT/SIGTERM save one before exiting. --task vocoder trains "
        "the vocoder (config section vocoder) on random aligned mel/audio segments of a "
        "cache built with data.keep_audio=true.",
    )  # fmt: skip
    fit_parser.add_argument("--data", type=Path, required=True, metavar="CACHE",
                            help="feature cache (xtts-data prepare output)")  # fmt: skip
    fit_parser.add_argument("--workdir", type=Path, required=True, metavar="RUN",
                            help="run folder: metrics, checkpoints, summary")  # fmt: skip
    fit_parser.add_argument(
        "--config", type=Path,
        help="YAML with sections model, text_to_mel, train, vocoder, decode and data's "
        "batching settings (e.g. "
        "a recipes/ file); model.preset defaults to tiny (~1.4M parameters, for a CPU; "
        "small and base are for a GPU); the audio recipe and the feature settings "
        "(data.text, trim_top_db, max_seconds) are the cache's, and a value given here "
        "that disagrees with them is an error",
    )  # fmt: skip
    fit_parser.add_argument(
        "--task", metavar="NAME",
        help="what to train: text_to_mel (the default) or vocoder (same as --set "
        "train.task=NAME; another name is refused, naming the known tasks)",
    )  # fmt: skip
    fit_parser.add_argument(
        "--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable), e.g. train.steps=500",
    )  # fmt: skip
    fit_parser.add_argument("--steps", type=int, help="total steps (same as --set train.steps=N)")
    fit_parser.add_argument(
        "--init-from", type=Path, metavar="RUN",
        help="start from the last checkpoint's weights of RUN, a run of the same task and "
        "model sizes (fine-tuning), with a fresh optimizer and schedule; a grown vocabulary "
        "keeps the embeddings of its old tokens (same as --set train.init_from=RUN; read "
        "when the run starts: a resumed run goes on from its own checkpoint)",
    )  # fmt: skip
    fit_parser.add_argument(
        "--allow-retrace", action="store_true",
        help="warn instead of stopping when a batch shape was not compiled",
    )  # fmt: skip
    fit_parser.add_argument(
        "--strategy", choices=STRATEGIES,
        help="tf.distribute strategy (same as --set train.strategy=...; default: auto = "
        "mirrored over all GPUs when there are several, else one device); multi-worker "
        "reads the cluster from TF_CONFIG",
    )  # fmt: skip
    fit_parser.add_argument(
        "--profile-steps", type=_step_range, metavar="FIRST:LAST",
        help="write a TensorBoard profile of steps FIRST..LAST (1-based) to "
        "RUN/tensorboard/plugins/profile (view with tensorboard-plugin-profile: pip "
        "install \"xtts-train[profile]\")",
    )  # fmt: skip
    fit_parser.add_argument("--quiet", action="store_true", help="no progress output")
    _add_check(commands)
    _add_synthesize(commands)
    _add_evaluate(commands)
    _add_vocode(commands)
    _add_gta(commands)
    _add_export(commands)
    _add_demo(commands)
    return parser


def _add_check(commands) -> None:
    p = commands.add_parser(
        "check", parents=_common(), help="static-shape and retracing diagnosis of the train step",
        description="Compile the train step for every batch shape of the cache's pipeline, "
        "run each shape --repeats times, and report traces, compile time and step-time "
        "CV per shape. Exits 1 when a shape was traced more than once.",
    )  # fmt: skip
    p.add_argument("--data", type=Path, required=True, metavar="CACHE")
    p.add_argument("--config", type=Path,
                   help="YAML config, as fit's (the feature settings are the cache's)")  # fmt: skip
    p.add_argument("--task", metavar="NAME",
                   help="the task whose step is checked: text_to_mel (the default) or "
                   "vocoder")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--repeats", type=int, default=2, help="steps per shape (default: 2)")
    p.add_argument("--estimate", action="store_true",
                   help="build and run nothing: print each bucket's estimated step memory "
                   "and, with --set train.memory_budget_gb=N, the batch sizes planned for "
                   "it (text_to_mel)")  # fmt: skip
    p.add_argument("--save-plan", type=Path, metavar="FILE",
                   help="with train.memory_budget_gb, also write the memory plan (measured, "
                   "or estimated with --estimate) to FILE, for `xtts-data doctor --plan` "
                   "(fit writes its own to RUN/memory_plan.json)")  # fmt: skip


def _add_synthesize(commands) -> None:
    p = commands.add_parser(
        "synthesize", parents=_common(), help="speak a text with a trained run",
        description="Decode a mel for TEXT with the run's last checkpoint (one compiled "
        "program: a static frame buffer, sized from the text unless --max-frames, and the "
        "stop token), turn it into audio with a vocoder run (--vocoder) or Griffin-Lim, and "
        "write OUT (WAV), OUT with .png (the mel and attention) and, with --save-mel, OUT "
        "with .npy (the mel). With --stream, the mel is decoded and vocoded --chunk-frames "
        "frames at a time and OUT grows as the audio arrives. A text longer than "
        "decode.split_symbols symbols (default 100) is spoken as pieces cut at "
        "sentences, then clauses, then words, decoded side by side (or streamed in turn) "
        "in the same voice and joined with a pause.",
    )  # fmt: skip
    p.add_argument("--run", type=Path, required=True, help="the training run folder")
    p.add_argument("--text", required=True)
    p.add_argument("--out", type=Path, required=True, help="WAV file to write")
    p.add_argument("--reference", type=Path,
                   help="voice to condition on (default: the run's reference clip)")  # fmt: skip
    p.add_argument("--max-frames", type=int, metavar="N",
                   help="decoding buffer in mel frames of each piece of the text; speech "
                   "longer is cut (default: sized from the longest piece, 0.5 s + 0.15 s per "
                   "symbol at the run's frame rate, at most the run's data.max_seconds); at "
                   "most 60 s of speech")  # fmt: skip
    p.add_argument("--save-mel", action="store_true",
                   help="also write the decoded mel, the frames turned into audio, as OUT "
                   "with .npy: float32 [frames, n_mels] in the run's feature scale (its "
                   "config.yaml audio section; see the xtts-train README)")  # fmt: skip
    p.add_argument("--vocoder", type=Path, metavar="RUN",
                   help="a vocoder run (fit --task vocoder) trained with this run's audio "
                   "settings (default: Griffin-Lim)")  # fmt: skip
    _add_griffin_lim_iters(p, "the audio")
    p.add_argument("--language", help="the text's language, a BCP-47 code such as fa or en "
                   "(default: the run's data.text.language); a multilingual run speaks "
                   "with that language's token")  # fmt: skip
    p.add_argument("--stream", action="store_true",
                   help="decode and vocode a chunk at a time, writing OUT as the audio arrives, "
                   "and print the time to the first audio; each chunk costs its decoder "
                   "steps and one vocoder window, never the frames before it (needs "
                   "--vocoder: Griffin-Lim cannot stream)")  # fmt: skip
    p.add_argument("--chunk-frames", type=int, metavar="N",
                   help="mel frames of each streamed chunk, in the decoder and the vocoder "
                   "(with --stream; default: 32)")  # fmt: skip
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (shown while a long text's pieces decode)")  # fmt: skip
    _add_decoding_set(p)


def _add_evaluate(commands) -> None:
    p = commands.add_parser(
        "evaluate", parents=_common(), help="score free-running synthesis of unseen text",
        description="Synthesise utterances the run never trained on, free-running (the "
        "compiled decoder, ended by the stop token, conditioned on the run's reference "
        "clip), and score each against its recording: duration ratio (synthesised / true "
        "frames), alignment score (focus x monotonicity x coverage of the attention, 1 = "
        "a clean diagonal), DTW log-mel distance, and pairing score (distance to its own "
        "recording / mean distance to the other utterances' recordings: about 1 for a "
        "model that ignores the text, well below 1 for one that says what it reads).",
    )  # fmt: skip
    p.add_argument("--run", type=Path, required=True, help="the training run folder")
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        metavar="CACHE_OR_CORPUS",
        help="feature cache or corpus with the run's audio and text settings",
    )
    _add_selection(p)
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="write DIR/<id>.wav (synthesised) and DIR/<id>.truth.wav (the "
                   "recording's own mel through the same vocoder or Griffin-Lim)")  # fmt: skip
    p.add_argument("--vocoder", type=Path, metavar="RUN",
                   help="with --out: a vocoder run (fit --task vocoder) trained with this "
                   "run's audio settings writes the audio (default: Griffin-Lim)")  # fmt: skip
    _add_griffin_lim_iters(p, "with --out: the audio")
    p.add_argument("--reference-from", choices=("run", "same-speaker", "other-speaker"),
                   default="run",
                   help="the voice each utterance is spoken in: the run's reference clip "
                   "(run, the default), a clip of another utterance of its own speaker "
                   "(same-speaker), or of the next speaker's (other-speaker: the swapped "
                   "control); the JSON report names each row's speaker and reference")  # fmt: skip
    _add_decoding_set(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_griffin_lim_iters(p, what: str) -> None:
    """`--griffin-lim-iters N` of a command that writes Griffin-Lim's audio without a
    vocoder (`synthesize`, `evaluate`)."""
    p.add_argument("--griffin-lim-iters", type=int, metavar="N",
                   help=f"{what} by Griffin-Lim: its iterations (default: 32; fewer are "
                   "faster and rougher); not with --vocoder")  # fmt: skip


def _griffin_lim_iters(args) -> dict[str, int]:
    """`griffin_lim_iters` for the command's function, if given: an int >= 1, without
    `--vocoder` (whose audio it would not change)."""
    if args.griffin_lim_iters is None:
        return {}
    if args.vocoder is not None:
        raise XttsTrainError("--griffin-lim-iters sets Griffin-Lim's audio, and --vocoder "
                             "writes the audio instead: pass one of them")  # fmt: skip
    if args.griffin_lim_iters < 1:
        raise XttsTrainError(f"--griffin-lim-iters: expected an int >= 1, received "
                             f"{args.griffin_lim_iters}")  # fmt: skip
    return {"griffin_lim_iters": args.griffin_lim_iters}


def _add_decoding_set(p) -> None:
    """`--set decode.KEY=VALUE`: a decoding setting of the trained run, changed for
    this command (`synthesize`, `evaluate`)."""
    p.add_argument("--set", action="append", default=[], metavar="decode.KEY=VALUE",
                   help="change one of the run's decoding settings for this command "
                   "(repeatable), e.g. decode.global_variance=true; the settings that "
                   "shape the weights are refused")  # fmt: skip


def _add_vocode(commands) -> None:
    p = commands.add_parser(
        "vocode", parents=_common(), help="copy synthesis: recordings' mels through a vocoder",
        description="Turn each held-out recording's own mel back into audio with a trained "
        "vocoder (fit --task vocoder) and with Griffin-Lim, write both (DIR/<id>.wav and "
        "DIR/<id>.gl.wav) beside the recording as the features saw it "
        "(DIR/<id>.recording.wav), and print each one's log-mel distance to the recording: "
        "the standard check of a vocoder. Every length runs through one compiled program.",
    )  # fmt: skip
    p.add_argument("--vocoder", type=Path, required=True, metavar="RUN",
                   help="the vocoder's training run")  # fmt: skip
    p.add_argument("--data", type=Path, required=True, metavar="CACHE_OR_CORPUS",
                   help="a cache built with data.keep_audio=true, or a corpus, with the run's "
                   "audio settings")  # fmt: skip
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the WAVs")
    _add_selection(p)
    p.add_argument("--griffin-lim-iters", type=int, default=60,
                   help="iterations of the Griffin-Lim baseline (default: 60)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_gta(commands) -> None:
    p = commands.add_parser(
        "gta", parents=_common(),
        help="ground-truth-aligned frames: a cache a vocoder fine-tunes on",
        description="Write a copy of a cache (built with data.keep_audio=true) whose mels are "
        "the text-to-mel run's teacher-forced frames of them (every dropout off), each over "
        "the same samples of its recording: fine-tune a vocoder on it with fit --task vocoder "
        "--data OUT --init-from VOCODER_RUN. Resumes where a killed run stopped; xtts-data "
        "verify checks it as any cache.",
    )  # fmt: skip
    p.add_argument("--run", type=Path, required=True, help="the text-to-mel run")
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        metavar="CACHE",
        help="the cache to copy (the run's audio settings and symbol table)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="CACHE", help="the copy to write")
    p.add_argument("--step", type=int, help="the checkpoint of this step (default: the last)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_selection(p) -> None:
    """`--split`, `--n` and `--step`: which utterances, and which checkpoint, a command of
    held-out audio (`evaluate`, `vocode`) reads."""
    p.add_argument(
        "--split", choices=("val", "all"), default="val",
        help="val: the utterances the run's data.val_fraction held out of training "
        "(default); all: every row, for a corpus the run never saw",
    )  # fmt: skip
    p.add_argument("--n", type=int, help="the first N utterances by id (default: all)")
    p.add_argument("--step", type=int, help="the checkpoint of this step (default: the last)")


def _add_export(commands) -> None:
    p = commands.add_parser(
        "export", parents=_common(cache=False),
        help="write a trained run as a SavedModel for inference",
        description="Write the run's last checkpoint as a SavedModel whose serving_default "
        "signature takes token ids (int32 [T], T <= --max-text) and a reference mel "
        "(float32 [frames, n_mels]) and returns mel, stop_probs, length and a waveform: "
        "the vocoder run's (--vocoder; it hears the --max-frames buffer, silence after the "
        "decoded frames) or Griffin-Lim's; tokenizer.json, config.yaml and reference.npy "
        "are saved as assets, and the vocoder's config.yaml as vocoder_config.yaml. A "
        "multilingual run's signature also takes language (a string tag such as fa) and "
        "puts that language's token in front of the token ids. Loading it needs "
        "TensorFlow only.",
    )  # fmt: skip
    p.add_argument("--run", type=Path, required=True, help="the training run's work dir")
    p.add_argument("--out", type=Path, required=True, help="the SavedModel folder to write")
    p.add_argument("--format", choices=("savedmodel", "onnx", "litert"), default="savedmodel",
                   help="savedmodel (default): one SavedModel, loaded by TensorFlow; onnx: "
                   "a voice folder of ONNX programs (conditioning, prefill, one decoder "
                   "step per buffer size, the decoder slots' steps, finish, vocoder) and "
                   "voice.json, spoken by xtts-runtime and served by xtts-serve --runtime "
                   "onnx without TensorFlow (needs the onnx extra); litert: the same "
                   "programs as LiteRT flatbuffers, without the slots, spoken by "
                   "xtts-runtime (its litert extra). onnx and litert need --vocoder")  # fmt: skip
    p.add_argument("--max-text", type=int,
                   help="savedmodel: longest token input (default: 256)")  # fmt: skip
    p.add_argument("--max-frames", type=int,
                   help="savedmodel: decoding buffer in frames (default: 400)")  # fmt: skip
    p.add_argument("--vocoder", type=Path, metavar="RUN",
                   help="a vocoder run (fit --task vocoder) trained with this run's audio "
                   "settings, which writes the waveform output (savedmodel default: "
                   "Griffin-Lim; required with --format onnx or litert)")  # fmt: skip
    p.add_argument("--slots", type=_row_counts, metavar="N[,N]",
                   help="onnx: the decoder slots' step programs, by row count: a server of "
                   "N slots (xtts-serve --runtime onnx --slots N) needs N here (default: "
                   "1,4,8)")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="decode.KEY=VALUE",
                   help="onnx, litert: a decoding setting the voice decodes with, as "
                   "synthesize --set (repeatable)")  # fmt: skip
    p.add_argument("--int8-vocoder", action="store_true",
                   help="onnx, litert: the vocoder's matmul weights in int8 (dynamic "
                   "quantization): about twice as fast to vocode, its samples no longer "
                   "TensorFlow's (onnx: the ConvNeXt blocks alone, ~52 dB from the float "
                   "vocoder's; litert: every weight, ~37 dB; docs/runtime.md)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="replace an existing --out")


def _row_counts(value: str) -> tuple[int, ...]:
    """--slots N[,N]: row counts, each an int >= 1."""
    try:
        counts = tuple(int(n) for n in value.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            f"expected row counts >= 1 such as 4,8, received: {value!r}"
        )
    return counts


def _add_demo(commands) -> None:
    p = commands.add_parser(
        "demo", parents=_common(),
        help="demo corpus -> cache -> short training -> synthesis, on a CPU",
        description="Write a corpus of English sentences spoken by espeak-ng (--engine "
        "espeak, the default; its library comes with xtts-data's phonemes extra) or of a "
        "small synthesised language (--engine synth), build its feature cache, train the "
        "tiny model (every batch shape compiled once, up front) for 5 minutes (espeak) or "
        "600 steps (synth), then speak sentences it never saw (24 or 8) free-running and "
        "score them as `evaluate` does, with top-1 sentence identification and, for "
        "espeak, an offline recogniser's word error rate beside the recordings' (the asr "
        "extra); last, synthesize a sentence beside its ground truth. Prints where "
        "everything went and a closing summary.",
    )  # fmt: skip
    p.add_argument("--workdir", type=Path, default=Path("xtts-demo"),
                   help="folder for corpus, cache and run (default: %(default)s)")  # fmt: skip
    p.add_argument("--engine", choices=("espeak", "synth"), default="espeak",  # demo.ENGINES
                   help="who speaks the corpus (default: %(default)s)")  # fmt: skip
    p.add_argument("--minutes", type=float,
                   help="minutes of training, compiles not counted (default: 5 with espeak "
                   "unless --steps is given; none with synth)")  # fmt: skip
    p.add_argument("--steps", type=int,
                   help="training steps at most, and the learning-rate schedule's length "
                   "(default: 20,000 with espeak, which its minutes end first; 600 with "
                   "synth)")  # fmt: skip
    p.add_argument("--utterances", type=int, help="demo corpus size (default: 600 with "
                   "espeak, 96 with synth; a corpus reused from --workdir must be this "
                   "size)")  # fmt: skip
    p.add_argument("--held-out", type=int, metavar="N",
                   help="held-out sentences scored after training (default: 24 with "
                   "espeak, 8 with synth; at least 2; a held-out corpus reused from "
                   "--workdir must be this size)")  # fmt: skip
    p.add_argument("--vocoder", type=Path, metavar="RUN",
                   help="speak the held-out sentences and the demo sentence through this "
                   "vocoder run (fit --task vocoder, the demo's audio settings) instead of "
                   "Griffin-Lim")  # fmt: skip
    p.add_argument(
        "--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="override one of the demo's settings (repeatable), e.g. model.d_model=64; "
        "audio and data settings need a new --workdir (its cache was built with the old ones)",
    )  # fmt: skip


def _common(*, cache: bool = True) -> list[argparse.ArgumentParser]:
    """`--verbose`, and `--no-compile-cache` for the commands that compile."""
    parser = argparse.ArgumentParser(add_help=False, parents=[verbose_flag()])
    if not cache:
        parser.set_defaults(no_compile_cache=True)  # export traces, runs nothing
        return [parser]
    parser.add_argument(
        "--no-compile-cache", action="store_true",
        help="compile every program in this run instead of loading it from the persistent "
        f"compile cache ({compile_cache.default_root() or 'off: ' + compile_cache.ENV}); "
        f"{compile_cache.ENV}=DIR moves the cache, {compile_cache.ENV}=off turns it off",
    )  # fmt: skip
    return [parser]


def _step_range(text: str) -> tuple[int, int]:
    first, sep, last = text.partition(":")
    try:
        steps = int(first), int(last)
    except ValueError:
        steps = None
    if not sep or steps is None or not 1 <= steps[0] <= steps[1]:
        raise argparse.ArgumentTypeError(
            f"expected FIRST:LAST with 1 <= FIRST <= LAST, e.g. 10:20, received {text!r}"
        )
    return steps


# Each handler imports what it runs: building the parser (and `--help`) must not load
# TensorFlow, and the compile cache must be on before TensorFlow compiles. Not a cycle.


def _run_fit(args) -> int:
    from xtts_train.config import load_stack_config
    from xtts_train.tasks.registry import fit

    stack = load_stack_config(args.config, args.set, cache=args.data)
    train = stack.train
    if args.steps is not None:
        train = dataclasses.replace(train, steps=args.steps)
    if args.allow_retrace:
        train = dataclasses.replace(train, allow_retrace=True)
    if args.strategy is not None:
        train = dataclasses.replace(train, strategy=args.strategy)
    if args.task is not None:
        train = dataclasses.replace(train, task=args.task)
    if args.init_from is not None:
        train = dataclasses.replace(train, init_from=str(args.init_from))
    summary = fit(dataclasses.replace(stack, train=train), args.data, args.workdir,
                  progress=not args.quiet, profile_steps=args.profile_steps)  # fmt: skip
    print(json.dumps(summary, indent=1))
    return 0


def _run_check(args) -> int:
    from xtts_data.plan import write_plan
    from xtts_train.check import check, estimate
    from xtts_train.config import load_stack_config

    stack = load_stack_config(args.config, args.set, cache=args.data)
    if args.task is not None:
        stack = dataclasses.replace(stack, train=dataclasses.replace(stack.train, task=args.task))
    if args.save_plan is not None and (stack.train.memory_budget_gb is None
                                       or stack.data.batch_sizes is not None):  # fmt: skip
        raise XttsTrainError("--save-plan writes the memory plan: set "
                             "train.memory_budget_gb (--set train.memory_budget_gb=N), "
                             "and no data.batch_sizes")  # fmt: skip
    if args.estimate:
        if stack.train.task != "text_to_mel":
            raise XttsTrainError(f"Expected --estimate with the text_to_mel task, received: "
                                 f"train.task={stack.train.task}")  # fmt: skip
        text, plan = estimate(stack, args.data)
        print(text)
    else:
        report = check(stack, args.data, repeats=args.repeats)
        print(report.format())
        plan = report.plan
    if args.save_plan is not None:
        write_plan(plan, args.save_plan)
        print(f"plan written to {args.save_plan} (xtts-data doctor CACHE --plan "
              f"{args.save_plan} times the pipeline at its batch sizes)")  # fmt: skip
    return 1 if not args.estimate and report.retraced else 0


def _run_synthesize(args) -> int:
    from xtts_train.synthesize import synthesize

    chunk = {}
    if args.chunk_frames is not None:
        if not args.stream:
            raise XttsTrainError("--chunk-frames sizes the streamed chunks: pass --stream with it")
        if args.chunk_frames < 1:
            raise XttsTrainError(f"--chunk-frames: expected an int >= 1, received "
                                 f"{args.chunk_frames}")  # fmt: skip
        chunk = {"chunk_frames": args.chunk_frames}
    result = synthesize(args.run, args.text, args.out, reference=args.reference,
                        max_frames=args.max_frames, language=args.language,
                        vocoder=args.vocoder, save_mel=args.save_mel, stream=args.stream,
                        overrides=args.set, progress=not args.quiet, **chunk,
                        **_griffin_lim_iters(args))  # fmt: skip
    if result.unknown:
        shown = ", ".join(f"{c!r} x{n}" for c, n in result.unknown.items())
        print(f"left out (not in the run's symbols, or removed by cleaning): {shown}; "
              f"the text became {result.text!r}", file=sys.stderr)  # fmt: skip
    ending = "the stop token" if result.stopped else "a length limit (no stop token in range)"
    mel = f", {result.npy} (the mel)" if result.npy is not None else ""
    pieces = f"; {len(result.pieces)} pieces, each in" if len(result.pieces) > 1 else " of"
    print(f"wrote {result.wav} ({result.seconds:.2f} s, {result.frames} frames{pieces} a "
          f"{result.max_frames}-frame buffer, ended by {ending}, alignment score "
          f"{result.alignment:.2f}){mel} and {result.png} (mel and attention)")  # fmt: skip
    if result.first_audio is not None:
        print(f"streamed: first audio after {result.first_audio * 1000:.0f} ms (programs "
              f"compiled beforehand)")  # fmt: skip
    return 0


def _run_evaluate(args) -> int:
    from xtts_train.evaluation.held_out import evaluate

    if args.n is not None and args.n < 2:
        raise XttsTrainError(f"--n: expected at least 2 utterances to pair, received {args.n}")
    if args.vocoder is not None and args.out is None:
        raise XttsTrainError("--vocoder writes the audio of --out: pass --out DIR with it")
    if args.griffin_lim_iters is not None and args.out is None:
        raise XttsTrainError("--griffin-lim-iters sets the audio of --out: pass --out DIR "
                             "with it")  # fmt: skip
    report = evaluate(args.run, args.data, split=args.split, n=args.n, out=args.out,
                      step=args.step, progress=not args.quiet, vocoder=args.vocoder,
                      reference_from=args.reference_from, overrides=args.set,
                      **_griffin_lim_iters(args))  # fmt: skip
    print(json.dumps(report.to_dict(), indent=1) if args.json else report.format())
    return 0


def _run_vocode(args) -> int:
    from xtts_train.vocode import vocode

    for name in ("n", "griffin_lim_iters"):
        value = getattr(args, name)
        if value is not None and value < 1:
            flag = "--" + name.replace("_", "-")
            raise XttsTrainError(f"{flag}: expected an int >= 1, received {value}")
    report = vocode(args.vocoder, args.data, args.out, split=args.split, n=args.n,
                    step=args.step, griffin_lim_iters=args.griffin_lim_iters,
                    progress=not args.quiet)  # fmt: skip
    print(json.dumps(report.to_dict(), indent=1) if args.json else report.format())
    return 0


def _run_gta(args) -> int:
    from xtts_train.gta import write_aligned_frames

    out = write_aligned_frames(args.run, args.data, args.out, step=args.step,
                               progress=not args.quiet)  # fmt: skip
    print(f"wrote {out}: {args.data} with the teacher-forced frames of {args.run}")
    return 0


def _run_export(args) -> int:
    if args.format != "savedmodel":
        return _run_export_voice(args)
    onnx_only = [f for f, given in (("--slots", args.slots), ("--set", args.set),
                                    ("--int8-vocoder", args.int8_vocoder)) if given]  # fmt: skip
    if onnx_only:
        raise XttsTrainError(f"Expected {' and '.join(onnx_only)} with --format onnx "
                             f"(--set and --int8-vocoder with litert too), received: "
                             f"--format savedmodel, whose "
                             f"buffers and decoding are the run's (--max-text, "
                             f"--max-frames)")  # fmt: skip
    from xtts_train.export import export

    # The sizes given; `export`'s own defaults for the others.
    sizes = {name: value for name, value in (("max_text", args.max_text),
                                             ("max_frames", args.max_frames))
             if value is not None}  # fmt: skip
    out = export(args.run, args.out, **sizes, vocoder=args.vocoder, force=args.force)
    voice = f"the vocoder {args.vocoder}" if args.vocoder else "Griffin-Lim"
    print(f"wrote SavedModel {out} (signature serving_default, waveform by {voice})")
    return 0


def _run_export_voice(args) -> int:
    from xtts_train.export_voice import export_voice

    sized = [
        f"--{n}"
        for n in ("max-text", "max-frames")
        if getattr(args, n.replace("-", "_")) is not None
    ]
    if sized or args.vocoder is None:
        raise XttsTrainError(
            f"Expected --format {args.format} with --vocoder and without "
            f"--max-text/--max-frames (its buffers are sized from each text), received: "
            f"{', '.join(sized) or 'no --vocoder'}"
        )  # fmt: skip
    out = export_voice(args.run, args.out, vocoder=args.vocoder, programs=args.format,
                       slots=args.slots, overrides=args.set,
                       int8_vocoder=args.int8_vocoder, force=args.force)  # fmt: skip
    kind = {"onnx": "ONNX", "litert": "LiteRT"}[args.format]
    print(f"wrote voice folder {out} ({kind} programs and voice.json; speak it with "
          f"xtts-runtime speak {out} --text ...)")  # fmt: skip
    return 0


def _run_demo(args) -> int:
    from xtts_train.demo import run_demo

    summary = run_demo(args.workdir, engine=args.engine, steps=args.steps,
                       minutes=args.minutes, utterances=args.utterances,
                       held_out=args.held_out, overrides=args.set,
                       vocoder=args.vocoder)  # fmt: skip
    print(summary)
    return 0


_COMMANDS = {"fit": _run_fit, "check": _run_check, "synthesize": _run_synthesize,
             "evaluate": _run_evaluate, "vocode": _run_vocode, "gta": _run_gta,
             "export": _run_export, "demo": _run_demo}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `xtts-train` console script (`argv` None); tests pass `argv`,
    and then neither stderr nor the compile cache of their process is touched."""
    args = _parser().parse_args(argv)
    start_cli(verbose=args.verbose, console=argv is None)
    if argv is None and not args.no_compile_cache:
        compile_cache.enable()  # before TensorFlow's first compile
    return run_command(_COMMANDS[args.command], args, prog="xtts-train", user_errors=_USER_ERRORS)


if __name__ == "__main__":
    sys.exit(main())
