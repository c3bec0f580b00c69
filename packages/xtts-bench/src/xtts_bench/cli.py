"""`xtts-bench`: side-by-side measurements of the xtts packages against what they replace.

Bad settings print one line and exit 2 (`xtts_audio.cli_runner`); bugs keep their
traceback. TensorFlow's start-up notices are kept off stderr
(`xtts_audio.startup.quiet_tensorflow`); `--verbose` shows them, and INFO logging.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys

from xtts_audio.cli_runner import run_command
from xtts_audio.errors import XttsAudioError
from xtts_audio.startup import start_cli, verbose_flag
from xtts_bench.errors import SettingsError, XttsBenchError
from xtts_bench.hlo.command import add_hlo_parser, run_hlo
from xtts_bench.runtime import add_runtime_parser, run_runtime
from xtts_bench.serve import ServeBenchConfig
from xtts_bench.settings import (
    SPEAKER_ENCODERS,
    AudioBenchConfig,
    CompilerBenchConfig,
    DataBenchConfig,
    GateConfig,
    LearningBenchConfig,
    PeersBenchConfig,
    ProfileBenchConfig,
    StartupBenchConfig,
    TrainBenchConfig,
)
from xtts_bench.soak import SoakConfig
from xtts_data.errors import XttsDataError
from xtts_train import XttsTrainError

__all__ = ["main"]

_USER_ERRORS = (XttsBenchError, XttsTrainError, XttsDataError, XttsAudioError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xtts-bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    audio = commands.add_parser(
        "audio",
        parents=[verbose_flag()],
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
    _add_compare(commands)
    _add_train(commands)
    _add_compiler(commands)
    _add_profile(commands)
    _add_startup(commands)
    _add_learning(commands)
    _add_decode(commands)
    _add_attention(commands)
    _add_speakers(commands)
    _add_wer(commands)
    _add_end_to_end(commands)
    _add_serve(commands)
    _add_soak(commands)
    _add_vocoder(commands)
    _add_peers(commands)
    _add_gate(commands)
    _add_overrides(add_hlo_parser(commands))
    add_runtime_parser(commands)
    return parser  # fmt: skip


def _add_compare(commands) -> None:
    data = commands.add_parser(
        "compare",
        parents=[verbose_flag()],
        help="xtts-data vs the pipelines it replaces (librosa or .npy through numpy_function)",
        description=(
            "On one corpus, side by side in one process: cache build (audio seconds per "
            "wall second) of xtts-data prepare vs librosa in a thread pool; then every input "
            "pipeline (xtts-data from its cache with buckets and fixed padding, xtts-data on "
            "the fly, .npy mels through tf.numpy_function, librosa through "
            "tf.numpy_function per sample) alone and feeding a simulated device that needs "
            "--device-ms per batch. One table: samples/s and the ratio to each baseline, "
            "batch latency mean and CV, device utilization, CPU-ms per sample, padding. "
            "Then the vocoder's segment pipelines, measured the same way: xtts-data "
            "make_segment_dataset (from a cache built with data.keep_audio=true) vs the "
            "usual Python cutter (WAV and .npy mel per utterance, a random aligned segment "
            "cut in NumPy through tf.numpy_function), one static segment shape each."
        ),
    )
    d = DataBenchConfig()
    data.add_argument(
        "corpus",
        nargs="?",
        help="a corpus xtts-data reads (LJSpeech folder, speaker folders or a filelist); "
        "omitted, a demo corpus of --utterances clips with LJSpeech-like lengths is written",
    )
    data.add_argument(
        "--utterances",
        type=int,
        default=d.utterances,
        help="demo corpus size, without CORPUS (default: %(default)s)",
    )
    data.add_argument(
        "--min-seconds",
        type=float,
        default=d.min_seconds,
        help="shortest demo clip, without CORPUS (default: %(default)s)",
    )
    data.add_argument(
        "--max-seconds",
        type=float,
        default=d.max_seconds,
        help="longest demo clip, without CORPUS (default: %(default)s)",
    )
    data.add_argument(
        "--batch-size",
        type=int,
        default=d.batch_size,
        help="utterances per batch (default: %(default)s)",
    )
    data.add_argument(
        "--batches",
        type=int,
        default=d.batches,
        help="batches timed per pipeline, pass and round (default: %(default)s)",
    )
    data.add_argument(
        "--device-ms",
        type=float,
        default=d.device_ms,
        help="simulated device step per batch (default: %(default)s)",
    )
    data.add_argument(
        "--rounds",
        type=int,
        default=d.rounds,
        help="alternating rounds; medians are reported (default: %(default)s)",
    )
    data.add_argument(
        "--workers",
        type=int,
        default=d.workers,
        help="cache-build threads of both builders (default: %(default)s)",
    )
    data.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_train(commands) -> None:
    train = commands.add_parser(
        "train",
        parents=[verbose_flag()],
        help="xtts-train's static-shape step vs a dynamic-shape tf.function step; fit",
        description=(
            "On a demo corpus of short clips, run the same batches of the bucketed pipeline "
            "through xtts-train's CompiledSteps (every shape built in a warm-up, by the "
            "compiler train.compiler picks: --set train.compiler=xla for XLA) and "
            "through a tf.function(jit_compile=True) step with no input_signature fed batches "
            "padded to their own longest row (and, with --graph, the same step without XLA); "
            "report total time with compiles, traces and shapes. "
            "Then fit for --fit-steps steps and report step-time median and CV, host "
            "overhead and input-bound fraction. Compiles cost tens of seconds per shape on a "
            "CPU: --dynamic-budget caps each dynamic side (the defaults take about 45 minutes "
            "on 2 cores; with --dynamic-budget 0, hours)."
        ),
    )
    t = TrainBenchConfig()
    for flag, value, text in [
        ("--batches", t.batches, "batches per side of the compile + steps comparison"),
        ("--utterances", t.utterances, "demo corpus size"),
        ("--batch-size", t.batch_size, "batch size of the longest bucket"),
        ("--num-buckets", t.num_buckets, "bucket shapes of the pipeline"),
        ("--cond-frames", t.cond_frames, "frames of the conditioning mel"),
        ("--fit-steps", t.fit_steps, "steps of the steady-state fit"),
        ("--threads", t.threads, "TensorFlow intra/inter-op threads"),
        ("--seed", t.seed, "corpus, shuffle and weight seed"),
    ]:
        train.add_argument(flag, type=int, default=value, help=f"{text} (default: %(default)s)")
    train.add_argument("--min-seconds", type=float, default=t.min_seconds,
                       help="shortest demo clip (default: %(default)s)")  # fmt: skip
    train.add_argument("--max-seconds", type=float, default=t.max_seconds,
                       help="longest demo clip (default: %(default)s)")  # fmt: skip
    train.add_argument("--preset", default=t.preset, help="model preset (default: %(default)s)")
    train.add_argument(
        "--dynamic-budget",
        type=float,
        default=t.dynamic_budget,
        metavar="X",
        help="stop a dynamic side once it has run X times the static side's total; its "
        "ratio is then a lower bound, reported with a projection for every batch "
        "(0: no limit; default: %(default)s)",
    )
    train.add_argument(
        "--dynamic",
        action=argparse.BooleanOptionalAction,
        default=t.dynamic,
        help="run the dynamic-shape sides; --no-dynamic runs only the static side and fit, "
        "for fit's step-time CV against the bare compiled step's (default: %(default)s)",
    )
    train.add_argument(
        "--graph",
        action=argparse.BooleanOptionalAction,
        default=t.graph,
        help="also run the dynamic step without XLA (default: %(default)s)",
    )
    _add_overrides(train)
    train.add_argument("--json", action="store_true", default=False,
                       help="print the figures as JSON")  # fmt: skip


def _add_compiler(commands) -> None:
    compiler = commands.add_parser(
        "compiler",
        parents=[verbose_flag()],
        help="XLA vs TensorFlow's graph executor: train step, eval step, decoding loop",
        description=(
            "For each --threads count, in fresh processes pinned to that many cores: build "
            "xtts-train's steps as fit does with train.compiler=xla and =graph, warm every "
            "shape of the spec up, and time the train step and the eval step at each shape "
            "and the decoding loop over --decode-frames frames; report which is faster per "
            "role (the measurement behind train.compiler=auto), each train step's FLOPs and "
            "its MFU against the cores' measured matmul peak. About 10 minutes on 2 cores "
            "at the defaults (the XLA compiles)."
        ),
    )
    c = CompilerBenchConfig()
    compiler.add_argument("--threads", type=int, nargs="+", default=list(c.threads),
                          help="thread counts, each measured in its own process "
                          "(default: %(default)s)")  # fmt: skip
    _add_int_flags(compiler, [
        ("--steps", c.steps, "timed train and eval steps per shape"),
        ("--decode-frames", c.decode_frames, "frames decoded per call (stop token held off)"),
        ("--decode-repeats", c.decode_repeats, "timed decoding calls"),
    ])  # fmt: skip
    _add_step_bench_flags(compiler, c)


def _add_int_flags(parser: argparse.ArgumentParser, flags) -> None:
    """`(flag, default, help)` int options."""
    for flag, value, text in flags:
        parser.add_argument(flag, type=int, default=value, help=f"{text} (default: %(default)s)")


def _add_step_bench_flags(parser: argparse.ArgumentParser, defaults) -> None:
    """The corpus and stack flags of a `_StepBench` settings class, `--set` and `--json`."""
    parser.add_argument("--data", type=pathlib.Path, default=None,
                        help="a feature cache (default: a demo corpus written for the run; "
                        "--set must match the cache's settings)")  # fmt: skip
    _add_int_flags(parser, [
        ("--batches", defaults.batches, "batches drawn to find the shapes measured"),
        ("--utterances", defaults.utterances, "demo corpus size (without --data)"),
        ("--batch-size", defaults.batch_size, "batch size of the longest bucket"),
        ("--num-buckets", defaults.num_buckets, "bucket shapes of the pipeline"),
        ("--cond-frames", defaults.cond_frames, "frames of the conditioning mel"),
        ("--seed", defaults.seed, "corpus, shuffle and weight seed"),
    ])  # fmt: skip
    parser.add_argument("--preset", default=defaults.preset,
                        help="model preset (default: %(default)s)")  # fmt: skip
    _add_overrides(parser)
    parser.add_argument("--json", action="store_true", default=False,
                        help="print the figures as JSON")  # fmt: skip


def _add_profile(commands) -> None:
    profile = commands.add_parser(
        "profile",
        parents=[verbose_flag()],
        help="the train step op by op (XProf): time per part of the model, loss and update",
        description=(
            "Build xtts-train's train step as fit does (train.compiler from --compiler) for "
            "one shape of the spec, warm it up, run --warm-steps unprofiled steps, then "
            "profile --steps steps with every op recorded, and group the ops' self times "
            "into the parts of the step (encoders, decoder attention, feed-forward, prenet, "
            "postnet, heads, each loss term, the update), forward and backward, with the "
            "time per kind of layer and per op type. With xla, fused ops are attributed to "
            "the TensorFlow op XLA recorded for each fusion. About a minute on a CPU."
        ),
    )
    p = ProfileBenchConfig()
    profile.add_argument("--compiler", choices=("graph", "xla"), default=p.compiler,
                         help="who runs the step (default: %(default)s)")  # fmt: skip
    _add_int_flags(profile, [
        ("--threads", p.threads, "TensorFlow intra/inter-op threads"),
        ("--steps", p.steps, "profiled steps"),
        ("--warm-steps", p.warm_steps, "unprofiled steps before them (the reference time)"),
        ("--bucket", p.bucket, "the profiled shape: index into the spec's (-1: longest)"),
    ])  # fmt: skip
    profile.add_argument("--trace-dir", type=pathlib.Path, default=None,
                         help="keep the TensorBoard profile here (default: discarded)")  # fmt: skip
    _add_step_bench_flags(profile, p)


def _add_startup(commands) -> None:
    startup = commands.add_parser(
        "startup",
        parents=[verbose_flag()],
        help="xtts-train's time to first step: cold, cold with concurrent compiles, warm",
        description=(
            "Run `xtts-train fit --steps 1` as new processes and read their summary.json: "
            "with an empty compile cache and one compile thread, with an empty cache and "
            "one compile thread per core, and again on the filled cache; for the demo's "
            "training and for the default 8-shape configuration. Prints time to first step "
            "and its parts, programs compiled and loaded, peak RSS, and the cold time "
            "projected for other core counts."
        ),
    )
    t = StartupBenchConfig()
    startup.add_argument("--workload", action="append", choices=["demo", "default"],
                         help="workloads to run (repeatable; default: both)")  # fmt: skip
    startup.add_argument("--corpus", type=pathlib.Path,
                         help="the default workload's corpus (default: synthetic)")  # fmt: skip
    startup.add_argument("--utterances", type=int,
                         help=f"clips of the default workload's synthetic corpus, without "
                         f"--corpus (default: {t.synthetic_utterances})")  # fmt: skip
    startup.add_argument("--compiler", choices=["auto", "xla", "graph"], default=t.compiler,
                         help="train.compiler of every run (default: auto, the graph "
                         "executor on a CPU)")  # fmt: skip
    startup.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_serve(commands) -> None:
    d = {f.name: f.default for f in dataclasses.fields(ServeBenchConfig)}
    p = commands.add_parser(
        "serve",
        parents=[verbose_flag()],
        help="xtts-serve from the client's side: time to first audio, 1-16 clients beside "
        "a one-slot server, start-up",
        description=(
            "Start xtts-serve (the console script) on 127.0.0.1 with RUN and VOC: once on an "
            "empty compile cache and once on the filled one (start-up: launch to GET /healthz "
            "200), then for each level of concurrent streaming clients (threads of this "
            "process, one connection each, held-out sentences in turn, raw PCM) for "
            "--seconds: time to first audio p50/p95, aggregate real-time factor, requests/s "
            "and 503s. The same levels again on a server with --slots 1 (one request "
            "decoded at a time). With --voice (the run exported: xtts-train export --format "
            "onnx), the same two servers on --runtime onnx too."
        ),
    )
    p.add_argument("--run", type=pathlib.Path, required=True, help="the text-to-mel run")
    p.add_argument("--vocoder", type=pathlib.Path, required=True, metavar="VOC",
                   help="a vocoder run of the run's audio settings")  # fmt: skip
    p.add_argument("--clients", type=int, action="append",
                   help=f"a level of concurrent clients (repeatable; default: "
                   f"{' '.join(map(str, d['clients']))})")  # fmt: skip
    p.add_argument("--seconds", type=float, default=d["seconds"],
                   help=f"seconds each level runs (default: {d['seconds']:g})")  # fmt: skip
    p.add_argument("--slots", type=int, default=d["slots"],
                   help=f"the measured server's --slots; the baseline has 1 (default: "
                   f"{d['slots']})")  # fmt: skip
    p.add_argument("--voice", type=pathlib.Path, metavar="DIR",
                   help="the run and VOC exported with --slots SLOTS,1 (xtts-train export "
                   "--format onnx): its servers on --runtime onnx measured beside "
                   "TensorFlow's")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_soak(commands) -> None:
    d = {f.name: f.default for f in dataclasses.fields(SoakConfig)}
    p = commands.add_parser(
        "soak",
        parents=[verbose_flag()],
        help="xtts-serve under minutes of mixed traffic, every response checked against "
        "its solo body; its memory over time",
        description=(
            "Start xtts-serve on 127.0.0.1 with RUN and VOC, get every request kind's body "
            "alone (held-out sentences in the run's voice and an uploaded one; streamed WAV "
            "and PCM, whole WAV, FLAC, MP3 and Opus), then run --clients threads for "
            "--minutes, each sending at random such requests (each body compared byte for "
            "byte with its solo body: mixed or lost counted), uploads of a voice spoken "
            "with then deleted, bad inputs (status and message checked) and streams left "
            "after their first bytes. Reports the tallies, whether the server is up with "
            "nothing waiting and no slot busy at the end, and its resident memory after the "
            "first minute and at the end."
        ),
    )
    p.add_argument("--run", type=pathlib.Path, required=True, help="the text-to-mel run")
    p.add_argument("--vocoder", type=pathlib.Path, required=True, metavar="VOC",
                   help="a vocoder run of the run's audio settings")  # fmt: skip
    p.add_argument("--minutes", type=float, default=d["minutes"],
                   help=f"how long the mixed traffic runs (default: {d['minutes']:g})")  # fmt: skip
    p.add_argument("--clients", type=int, default=d["clients"],
                   help=f"concurrent client threads (default: {d['clients']})")  # fmt: skip
    p.add_argument("--slots", type=int, default=d["slots"],
                   help=f"the server's --slots (default: {d['slots']})")  # fmt: skip
    p.add_argument("--seed", type=int, default=d["seed"],
                   help=f"the clients' random choices (default: {d['seed']})")  # fmt: skip
    p.add_argument("--json", action="store_true",
                   help="print the figures as JSON (with the memory samples and the first "
                   "unexpected answers)")  # fmt: skip


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="stack-config override applied last, as xtts-train --set (repeatable)",
    )


def _add_learning(commands) -> None:
    p = commands.add_parser(
        "learning", parents=[verbose_flag()],
        help="learning curve: free-running scores of held-out sentences vs steps and minutes",
        description=(
            "Train with xtts-train fit on --data, keeping a checkpoint every --every steps, "
            "then score each with xtts-train evaluate on --n sentences of --held-out: "
            "pairing score, DTW distance, median duration ratio, alignment, stop-token share, "
            "against steps and the wall minutes of training on this machine (compile "
            "included). With --voices, --held-out is a corpus of voices never trained on "
            "and each checkpoint is also judged by the speaker measure: identified as the "
            "reference clip's voice, with the speaker's own clip and with another "
            "speaker's. Writes OUT/run, OUT/curve.json and OUT/curve.png. With --run "
            "instead of --data, scores an existing run's kept checkpoints at --every steps "
            "up to --steps where they are, training nothing."
        ),
    )  # fmt: skip
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=pathlib.Path, metavar="CACHE",
                        help="train a run on this feature cache into OUT/run")  # fmt: skip
    source.add_argument("--run", type=pathlib.Path, metavar="RUN",
                        help="score this existing run (xtts-train fit --workdir RUN) instead; "
                        "its minutes are its own, from its metrics.jsonl")  # fmt: skip
    p.add_argument("--held-out", type=pathlib.Path, required=True, metavar="CACHE_OR_CORPUS")
    p.add_argument("--out", type=pathlib.Path, required=True, metavar="DIR")
    t = {f.name: f.default for f in dataclasses.fields(LearningBenchConfig)}
    p.add_argument("--steps", type=int, default=t["steps"],
                   help="training steps (default: %(default)s)")  # fmt: skip
    p.add_argument("--every", type=int, default=t["every"],
                   help="steps between scored checkpoints (default: %(default)s)")  # fmt: skip
    p.add_argument(
        "--split", choices=("all", "val"), default=t["split"],
        help="all: every row of --held-out; val: its held-out ids (default: %(default)s)",
    )  # fmt: skip
    p.add_argument("--n", type=int, default=t["n"], help="sentences scored (default: %(default)s)")
    p.add_argument("--voices", action="store_true",
                   help="--held-out is a corpus of held-out voices (demo-corpus "
                   "--held-out-speakers): score whose voice each synthesis is, spoken with "
                   "its own speaker's clip and with the next speaker's")  # fmt: skip
    p.add_argument("--vocoder", type=pathlib.Path, metavar="RUN",
                   help="with --voices: a vocoder run (xtts-train fit --task vocoder) turns "
                   "the syntheses into the audio the speaker measure hears (default: "
                   "Griffin-Lim)")  # fmt: skip
    _add_long_form(p, "the last checkpoint also speaks, --n of them, with the run's sentence "
                      "splitting and without")  # fmt: skip
    _add_overrides(p)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_decode(commands) -> None:
    p = commands.add_parser(
        "decode", parents=[verbose_flag()],
        help="real-time factor of compiled free-running decoding, run by run",
        description=(
            "Load each run's last checkpoint, decode a fixed sentence into a --frames "
            "buffer with the stop token held off (so every run decodes the same frames) "
            "and report audio seconds per wall second (the median of --repeats calls; "
            "compile and first call not timed). Compare runs trained with different "
            "model.reduction_factor side by side."
        ),
    )  # fmt: skip
    p.add_argument("runs", type=pathlib.Path, nargs="+", metavar="RUN")
    p.add_argument("--frames", type=int, default=256, help="frames decoded (default: 256)")
    p.add_argument("--batch-size", type=int, default=1, help="sentences at once (default: 1)")
    p.add_argument("--repeats", type=int, default=5, help="timed calls (default: 5)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_attention(commands) -> None:
    p = commands.add_parser(
        "attention", parents=[verbose_flag()],
        help="training memory and step time of the dense vs the blocked self-attention",
        description=(
            "For every --frames and every --blocks value (model.attention_block; 0 is the "
            "dense product), build fit's train step at one static shape in a fresh process, "
            "warm it up, and report the median step time over --steps rounds (every setting "
            "once a round, interleaved) and the step's working memory (TensorFlow's "
            "allocator peak during a step less what was live before it), each beside the "
            "dense product's, and the memory's growth per "
            "frame count."
        ),
    )  # fmt: skip
    p.add_argument(
        "--frames",
        default="256,512,1024",
        help="decoder frames of the batches, comma-separated (default: %(default)s)",
    )
    p.add_argument(
        "--blocks",
        default="0,128",
        help="model.attention_block values, comma-separated (default: %(default)s)",
    )
    _add_int_flags(p, [("--batch-size", 8, "rows of the batch"),
                       ("--text-len", 64, "tokens of the batch"),
                       ("--steps", 9, "timed rounds (median)"),
                       ("--threads", 2, "TensorFlow intra/inter-op threads")])  # fmt: skip
    _add_overrides(p)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_speakers(commands) -> None:
    p = commands.add_parser(
        "speakers", parents=[verbose_flag()],
        help="the speaker measure's ground truth on a multi-voice corpus's recordings",
        description=(
            "Measure every recording's voice vector (MFCC and pitch statistics) and report "
            "what the speaker measure of xtts_bench.speakers scores on the recordings "
            "themselves: leave-one-out top-1 identification beside chance, and the mean "
            "cosine similarity of two recordings of the same voice and of different voices "
            "(e.g. on a demo corpus's held-out/ voices: demo-corpus --held-out-speakers)."
        ),
    )  # fmt: skip
    p.add_argument("corpus", type=pathlib.Path, help="a corpus with a speaker per row")
    p.add_argument("--per-voice", type=int, default=None, metavar="N",
                   help="the first N recordings of each voice (default: all)")  # fmt: skip
    p.add_argument("--syntheses", type=pathlib.Path, metavar="REPORT",
                   help="also judge the syntheses of `xtts-train evaluate --data CORPUS "
                   "--split all --reference-from same-speaker|other-speaker --out DIR "
                   "--json > REPORT` (with --audio DIR): identified as the reference's "
                   "voice, and their similarity to it")  # fmt: skip
    p.add_argument("--audio", type=pathlib.Path, metavar="DIR",
                   help="with --syntheses: evaluate's --out folder")  # fmt: skip
    p.add_argument("--encoder", choices=SPEAKER_ENCODERS, default="mfcc",
                   help="the voice vector: mfcc, MFCC and pitch statistics (default); ge2e, "
                   "the GE2E speaker encoder's embedding (resemblyzer, the ge2e extra), a "
                   "second opinion from a network trained on thousands of speakers")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_end_to_end(commands) -> None:
    p = commands.add_parser(
        "end-to-end", parents=[verbose_flag()],
        help="the whole chain as a listener hears it: WER, DNSMOS and voice, beside the "
        "recordings",
        description=(
            "Score the syntheses of `xtts-train evaluate --data CORPUS --split all "
            "--reference-from same-speaker|other-speaker --out DIR [--vocoder VOC] --json > "
            "REPORT` three ways beside DIR's vocoded recordings (<id>.truth.wav) and the "
            "corpus's recordings themselves: the word error rate of one offline recogniser "
            "(pocketsphinx, English), DNSMOS's predicted MOS (speechmos's networks, offline) "
            "and the voice (identified as the clip's, likeness to it). Needs the asr and mos "
            'extras (and ge2e for --encoder ge2e): pip install "xtts-bench[asr,mos]".'
        ),
    )  # fmt: skip
    p.add_argument("corpus", type=pathlib.Path,
                   help="the corpus evaluate read (a speaker per row; its words)")  # fmt: skip
    p.add_argument("--syntheses", type=pathlib.Path, required=True, metavar="REPORT",
                   help="evaluate's --json report")  # fmt: skip
    p.add_argument("--audio", type=pathlib.Path, required=True, metavar="DIR",
                   help="evaluate's --out folder")  # fmt: skip
    p.add_argument("--encoder", choices=SPEAKER_ENCODERS, default="mfcc",
                   help="the voice vector (as `speakers --encoder`; default: mfcc)")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_wer(commands) -> None:
    p = commands.add_parser(
        "wer", parents=[verbose_flag()],
        help="word error rate of an offline recogniser on synthesis vs ground truth (English)",
        description=(
            "Synthesise --n sentences of the corpus --held-out with RUN's checkpoint "
            "(xtts-train evaluate --split all --out), transcribe each synthesis and its "
            "ground-truth mel through the same Griffin-Lim with pocketsphinx (English; a "
            "unigram language model over the held-out sentences' words), and report both "
            "word error rates, their ratio and chance (the ground truth against the other "
            'sentences\' texts). Needs the asr extra: pip install "xtts-bench[asr]".'
        ),
    )  # fmt: skip
    p.add_argument("run", type=pathlib.Path, metavar="RUN")
    p.add_argument("--held-out", type=pathlib.Path, required=True, metavar="CORPUS",
                   help="a corpus the run never saw (its text is the reference)")  # fmt: skip
    p.add_argument("--n", type=int, default=None, help="sentences (default: all)")
    p.add_argument("--step", type=int, default=None, help="checkpoint step (default: the last)")
    p.add_argument("--out", type=pathlib.Path, default=None, metavar="DIR",
                   help="keep the WAV files here (default: a temporary folder)")  # fmt: skip
    p.add_argument("--vocoder", type=pathlib.Path, default=None, metavar="VOCODER_RUN",
                   help="synthesis and ground truth through this vocoder run (fit --task "
                   "vocoder) instead of Griffin-Lim")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_vocoder(commands) -> None:
    p = commands.add_parser(
        "vocoder", parents=[verbose_flag()],
        help="a vocoder's copy synthesis scored: PESQ, STOI, log-mel distance, WER vs GL",
        description=(
            "Copy-synthesise --n recordings of --held-out (xtts-train vocode "
            "--split all: each recording's own mel through the vocoder RUN and through "
            "Griffin-Lim) and score both re-syntheses against the recording: wide-band PESQ "
            "(at 16 kHz), STOI, log-mel distance, and pocketsphinx's word error rate of the "
            "recordings, the vocoder and Griffin-Lim (English; --no-wer skips it). Needs the "
            'quality extra (pip install "xtts-bench[quality]": pesq builds with a C compiler) '
            "and, for the WER, the asr extra."
        ),
    )  # fmt: skip
    p.add_argument("run", type=pathlib.Path, metavar="RUN", help="the vocoder run")
    p.add_argument("--held-out", type=pathlib.Path, required=True, metavar="CORPUS",
                   help="a corpus the vocoder never trained on; with --no-wer also a cache "
                   "with waveforms, e.g. xtts-train gta's: its frames, not the recordings' "
                   "mels, go through the vocoder (ground-truth-aligned copy "
                   "synthesis)")  # fmt: skip
    p.add_argument("--n", type=int, default=None, help="recordings (default: all)")
    p.add_argument("--step", type=int, default=None, help="checkpoint step (default: the last)")
    p.add_argument("--griffin-lim-iters", type=int, default=60,
                   help="iterations of the Griffin-Lim baseline (default: 60)")  # fmt: skip
    p.add_argument("--no-wer", action="store_true", help="skip the recogniser")
    p.add_argument("--out", type=pathlib.Path, default=None, metavar="DIR",
                   help="keep the WAV files here (default: a temporary folder)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_peers(commands) -> None:
    p = commands.add_parser(
        "peers", parents=[verbose_flag()],
        help="xtts vs Glow-TTS and/or Matcha-TTS trained side by side, one core each, same "
             "minutes",
        description=(
            "Prepare CORPUS for xtts, then train xtts (xtts-train fit) and each of --peers at "
            "once: Glow-TTS (coqui-tts's model, loss and RAdam + Noam), Matcha-TTS "
            "(matcha-tts's model, loss and Adam), each in a minimal loop; every system pinned "
            "to one core (--cores) with one thread, each stopped after --minutes of its own "
            "wall time (compile included). All read xtts-data's phoneme ids. Every system's "
            "checkpoint nearest each --every-minutes mark, and its last, synthesises the first "
            "--n sentences of --held-out through its own Griffin-Lim; one scorer computes xtts "
            "preset log-mels of every WAV: DTW distance, pairing score, top-1 sentence "
            "identification. Writes OUT/peers.json and OUT/peers.png. Needs the peers extra "
            "(and matcha for Matcha-TTS): hatch run peers:bench-peers ..."
        ),
    )  # fmt: skip
    p.add_argument("--corpus", type=pathlib.Path, required=True, metavar="CORPUS")
    p.add_argument("--held-out", type=pathlib.Path, required=True, metavar="CORPUS",
                   help="a corpus neither system trains on")  # fmt: skip
    p.add_argument("--out", type=pathlib.Path, required=True, metavar="DIR",
                   help="a new or empty folder")  # fmt: skip
    t = {f.name: f.default for f in dataclasses.fields(PeersBenchConfig)}
    for name, text in (("minutes", "wall budget of each system"),
                       ("every_minutes", "the curve's spacing in minutes"),
                       ("n", "held-out sentences scored"),
                       ("xtts_checkpoint_every", "steps between xtts checkpoints"),
                       ("glow_hidden", "Glow-TTS channels (encoder, decoder, durations)"),
                       ("glow_flows", "Glow-TTS decoder flow blocks"),
                       ("glow_encoder_layers", "Glow-TTS encoder layers"),
                       ("glow_batch_size", "Glow-TTS utterances per step"),
                       ("glow_learning_rate", "Glow-TTS RAdam peak learning rate"),
                       ("glow_warmup_steps", "Glow-TTS Noam warm-up steps"),
                       ("matcha_hidden", "Matcha-TTS text encoder channels (a multiple of 8)"),
                       ("matcha_encoder_layers", "Matcha-TTS text encoder layers"),
                       ("matcha_decoder_channels", "Matcha-TTS U-Net channels"),
                       ("matcha_batch_size", "Matcha-TTS utterances per step"),
                       ("matcha_learning_rate", "Matcha-TTS Adam learning rate"),
                       ("seed", "the peers' weights and batch order")):  # fmt: skip
        p.add_argument(f"--{name.replace('_', '-')}", type=type(t[name]), default=t[name],
                       help=f"{text} (default: %(default)s)")  # fmt: skip
    p.add_argument("--peers", default=",".join(t["peers"]), metavar="NAMES",
                   help="the systems beside xtts, comma-separated: glow_tts, matcha "
                        "(default: %(default)s)")  # fmt: skip
    p.add_argument("--cores", default=",".join(map(str, t["cores"])), metavar="CORES",
                   help="the core of xtts and of each peer, in --peers' order "
                        "(default: %(default)s)")  # fmt: skip
    p.add_argument("--score-only", action="store_true",
                   help="train nothing: score the checkpoints of the finished training in "
                        "--out (its trainers.json), with that run's settings")  # fmt: skip
    _add_long_form(p, "each system's last checkpoint also speaks, --n of them: xtts with "
                      "its sentence splitting and without, Glow-TTS whole")  # fmt: skip
    _add_overrides(p)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _add_long_form(p, who: str) -> None:
    p.add_argument("--long-form", type=pathlib.Path, action="append", default=[],
                   metavar="CORPUS",
                   help=f"a corpus of long items (several sentences, or sentences longer than "
                   f"the training clips; repeatable) that {who}; scored by the sentences in "
                   f"each item")  # fmt: skip


def _add_gate(commands) -> None:
    gate = commands.add_parser(
        "gate",
        parents=[verbose_flag()],
        help="fail when HEAD is slower than a base commit or compiles/traces more (asv)",
        description=(
            "Run `asv continuous --factor F BASE HEAD` (asv builds and installs each commit's "
            "packages into its own virtualenv, runs the benchmarks of benchmarks/ on both, "
            "and fails on any benchmark worse by more than F), then fail on any count "
            "benchmark (track_traces, track_compiled_shapes, track_static_shapes, "
            "track_python_ops) that grew at all. Exit code 0: passed; 1: a regression; 2: "
            "bad arguments. Run it from the repository root."
        ),
    )
    g = GateConfig()
    gate.add_argument(
        "base", nargs="?", default=g.base, help="base revision (default: %(default)s)"
    )
    gate.add_argument(
        "head", nargs="?", default=g.head, help="revision measured (default: %(default)s)"
    )
    gate.add_argument("--factor", type=float, default=g.factor,
                      help="allowed slowdown ratio (default: %(default)s)")  # fmt: skip
    gate.add_argument("--bench", action="append", default=[], metavar="REGEX",
                      help="only benchmarks matching (repeatable; default: all)")  # fmt: skip
    gate.add_argument(
        "--machine", default=g.machine, help="asv machine name (default: %(default)s)"
    )
    gate.add_argument("--quick", action="store_true",
                      help="one sample per benchmark (asv --quick): noisy")  # fmt: skip
    gate.add_argument("--config", default=str(g.config), help="asv config (default: %(default)s)")


# Each runner imports its benchmark: building the parser (and `--help`) must not load
# TensorFlow, librosa or asv, which take seconds, and `main` quiets TensorFlow before it
# loads. Not an import cycle.


def _run_gate(args) -> tuple[int, str]:
    from xtts_bench.gate import run_gate

    config = GateConfig(base=args.base, head=args.head, factor=args.factor,
                        bench=tuple(args.bench), machine=args.machine,
                        config=pathlib.Path(args.config),
                        extra=("--quick",) if args.quick else ())  # fmt: skip
    return run_gate(config)


def _run_audio(args) -> str | dict:
    from xtts_bench.audio import format_table, run_audio_benchmarks

    bench = AudioBenchConfig(
        clips=args.clips, min_seconds=args.min_seconds, max_seconds=args.max_seconds,
        batch_size=args.batch_size, rounds=args.rounds, threads=args.threads, preset=args.preset,
    )  # fmt: skip
    results = run_audio_benchmarks(bench)
    return results if args.json else format_table(results)


def _run_compare(args) -> str | dict:
    from xtts_bench.data import format_data_table, run_data_benchmarks

    bench = DataBenchConfig(
        corpus=args.corpus, utterances=args.utterances, min_seconds=args.min_seconds,
        max_seconds=args.max_seconds, batch_size=args.batch_size, batches=args.batches,
        device_ms=args.device_ms, rounds=args.rounds, workers=args.workers,
    )  # fmt: skip
    results = run_data_benchmarks(bench)
    return results if args.json else format_data_table(results)


def _run_train(args) -> str | dict:
    from xtts_bench.train import format_train_table, run_train_benchmarks

    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainBenchConfig)}
    bench = TrainBenchConfig(**{**fields, "overrides": tuple(args.overrides)})
    results = run_train_benchmarks(bench, progress=True)  # on stderr: JSON stays clean
    return results if args.json else format_train_table(results)


def _run_compiler(args) -> str | dict:
    from xtts_bench.compilers import format_compiler_table, run_compiler_benchmark

    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(CompilerBenchConfig)}
    bench = CompilerBenchConfig(**{**fields, "threads": tuple(args.threads),
                                   "overrides": tuple(args.overrides)})  # fmt: skip
    results = run_compiler_benchmark(bench, progress=True)
    return results if args.json else format_compiler_table(results)


def _run_profile(args) -> str | dict:
    from xtts_bench.profile import format_profile_table, run_profile_benchmark

    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(ProfileBenchConfig)}
    bench = ProfileBenchConfig(**{**fields, "overrides": tuple(args.overrides)})
    results = run_profile_benchmark(bench, progress=True)
    return results if args.json else format_profile_table(results)


def _run_startup(args) -> str | dict:
    from xtts_bench.startup import format_startup_table, run_startup_benchmarks

    workloads = tuple(args.workload) if args.workload else StartupBenchConfig().workloads
    bench = StartupBenchConfig(workloads=workloads, corpus=args.corpus,
                               utterances=args.utterances, compiler=args.compiler)  # fmt: skip
    results = run_startup_benchmarks(bench)
    return results if args.json else format_startup_table(results)


def _run_serve(args) -> str | dict:
    from xtts_bench.serve import format_serve_table, run_serve_benchmark

    clients = {} if args.clients is None else {"clients": tuple(args.clients)}
    bench = ServeBenchConfig(run=args.run, vocoder=args.vocoder, seconds=args.seconds,
                             slots=args.slots, voice=args.voice, **clients)  # fmt: skip
    results = run_serve_benchmark(bench)
    return results if args.json else format_serve_table(results)


def _run_soak(args) -> str | dict:
    from xtts_bench.soak import format_soak_table, run_soak

    soak = SoakConfig(run=args.run, vocoder=args.vocoder, minutes=args.minutes,
                      clients=args.clients, slots=args.slots, seed=args.seed)  # fmt: skip
    results = run_soak(soak)
    return results if args.json else format_soak_table(results)


def _run_learning(args) -> str | dict:
    from xtts_bench.learning import format_learning_table, run_learning_benchmark

    bench = LearningBenchConfig(data=args.data, run=args.run, held_out=args.held_out,
                                out=args.out, steps=args.steps, every=args.every,
                                split=args.split, n=args.n, overrides=tuple(args.overrides),
                                voices=args.voices, vocoder=args.vocoder,
                                long_form=tuple(args.long_form))  # fmt: skip
    result = run_learning_benchmark(bench)
    return result if args.json else format_learning_table(result)


def _run_decode(args) -> str | dict:
    from xtts_bench.decode import format_decode_table, run_decode_benchmark

    result = run_decode_benchmark(args.runs, frames=args.frames, batch_size=args.batch_size,
                                  repeats=args.repeats)  # fmt: skip
    return result if args.json else format_decode_table(result)


def _run_attention(args) -> str | dict:
    from xtts_bench.attention import format_attention_table, run_attention_benchmark

    result = run_attention_benchmark(
        frames=_int_list("--frames", args.frames), blocks=_int_list("--blocks", args.blocks),
        batch_size=args.batch_size, text_len=args.text_len, steps=args.steps,
        threads=args.threads, overrides=tuple(args.overrides),
    )  # fmt: skip
    return result if args.json else format_attention_table(result)


def _int_list(flag: str, text: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",")]
    except ValueError:
        raise SettingsError(f"{flag}: expected comma-separated ints, received: {text!r}") from None


def _run_speakers(args) -> str | dict:
    from xtts_bench import speakers

    if args.per_voice is not None and args.per_voice < 2:
        raise SettingsError(f"--per-voice: expected an int >= 2, received: {args.per_voice}")
    if (args.syntheses is None) != (args.audio is None):
        raise SettingsError("--syntheses and --audio go together: evaluate's JSON and --out")
    if args.syntheses is not None:
        report = json.loads(args.syntheses.read_text())
        result = speakers.score_syntheses(args.corpus, report, args.audio,
                                          encoder=args.encoder)  # fmt: skip
        table = speakers.format_synthesis_table
    else:
        table = speakers.format_speaker_table
        vectors = speakers.read_voices(args.corpus, per_voice=args.per_voice,
                                       encoder=args.encoder)  # fmt: skip
        result = speakers.ground_truth(vectors, encoder=args.encoder)
    if args.json:
        return {"encoder": args.encoder, **result}
    return f"voice vectors: {args.encoder}\n{table(result)}"


def _run_end_to_end(args) -> str | dict:
    from xtts_bench.end_to_end import format_end_to_end_table, score_end_to_end

    report = json.loads(args.syntheses.read_text())
    result = score_end_to_end(args.corpus, report, args.audio, encoder=args.encoder,
                              progress=not args.quiet)  # fmt: skip
    return result if args.json else format_end_to_end_table(result)


def _run_wer(args) -> str | dict:
    from xtts_bench.intelligibility import format_wer_table, run_wer_benchmark

    result = run_wer_benchmark(args.run, args.held_out, n=args.n, step=args.step,
                               out=args.out, vocoder=args.vocoder)  # fmt: skip
    return result if args.json else format_wer_table(result)


def _run_vocoder(args) -> str | dict:
    from xtts_bench.copy_synthesis import format_vocoder_table, run_vocoder_benchmark

    for flag, value in (("--n", args.n), ("--griffin-lim-iters", args.griffin_lim_iters)):
        if value is not None and value < 1:
            raise SettingsError(f"{flag}: expected an int >= 1, received: {value}")
    result = run_vocoder_benchmark(args.run, args.held_out, n=args.n, step=args.step,
                                   out=args.out, griffin_lim_iters=args.griffin_lim_iters,
                                   wer=not args.no_wer)  # fmt: skip
    return result if args.json else format_vocoder_table(result)


def _run_peers(args) -> str | dict:
    from xtts_bench.peers import format_peers_table, require_peers_extra, run_peers_benchmark

    peers = tuple(name.strip() for name in args.peers.split(","))
    require_peers_extra(peers)  # before any work or setting: the one thing to fix first
    cores = tuple(int(c) if c.strip().isdigit() else c for c in args.cores.split(","))
    names = [f.name for f in dataclasses.fields(PeersBenchConfig)]
    fields = {name: getattr(args, name) for name in names
              if name not in ("peers", "cores", "overrides", "long_form")}  # fmt: skip
    bench = PeersBenchConfig(**fields, peers=peers, cores=cores,
                             overrides=tuple(args.overrides),
                             long_form=tuple(args.long_form))  # fmt: skip
    result = run_peers_benchmark(bench)
    return result if args.json else format_peers_table(result)


_COMMANDS = {"audio": _run_audio, "compare": _run_compare, "train": _run_train,
             "compiler": _run_compiler, "profile": _run_profile,
             "startup": _run_startup, "learning": _run_learning,
             "decode": _run_decode, "attention": _run_attention,
             "speakers": _run_speakers, "wer": _run_wer, "end-to-end": _run_end_to_end,
             "vocoder": _run_vocoder, "serve": _run_serve, "soak": _run_soak,
             "peers": _run_peers, "hlo": run_hlo, "runtime": run_runtime}  # fmt: skip


def _run(args) -> int:
    if args.command == "gate":
        code, verdict = _run_gate(args)
        print(verdict)
        return code
    output = _COMMANDS[args.command](args)
    print(json.dumps(output, indent=2) if isinstance(output, dict) else output)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `xtts-bench` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    start_cli(verbose=args.verbose, console=argv is None)
    return run_command(_run, args, prog="xtts-bench", user_errors=_USER_ERRORS)


if __name__ == "__main__":
    sys.exit(main())
