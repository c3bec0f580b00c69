"""`xtts-data`: build and check feature caches, diagnose input pipelines, serve tf.data.

User errors (bad paths, configs, damaged caches) print one line and exit 2, bugs keep
their traceback (`xtts_audio.cli_runner`); `verify` exits 1 when it finds damage.
TensorFlow's start-up notices are kept off stderr (`xtts_audio.startup.quiet_tensorflow`);
`--verbose` shows them, and INFO logging.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path

from xtts_audio.cli_runner import run_command
from xtts_audio.errors import XttsAudioError
from xtts_audio.startup import start_cli, verbose_flag
from xtts_data._demo_sentences import LANGUAGES as DEMO_LANGUAGES
from xtts_data._demo_sentences import TEXT_KINDS as DEMO_TEXTS
from xtts_data.errors import XttsDataError

__all__ = ["main"]

_USER_ERRORS = (XttsDataError, XttsAudioError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xtts-data",
        description="Turn a TTS corpus into a verified feature cache and feed it to training "
        "in batches of a few static shapes, with no Python in the tf.data graph.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_prepare(commands)
    _add_verify(commands)
    _add_doctor(commands)
    _add_serve(commands)
    _add_demo_corpus(commands)
    return parser


def _add_prepare(commands) -> None:
    p = commands.add_parser(
        "prepare",
        parents=[verbose_flag()],
        help="compute mel features and tokens once, into a sharded cache",
        description="Read CORPUS (LJSpeech layout, speaker folders, or a path|text|speaker "
        "filelist), decode and resample its audio, compute mel features with xtts-audio and "
        "token ids, and write TFRecord shards plus manifest.json and report.json to CACHE. "
        "Rows that cannot be used are skipped and listed with the reason. Killed, the same "
        "command resumes where it stopped.",
    )
    p.add_argument("corpus", type=Path, help="corpus folder or filelist")
    p.add_argument("--out", type=Path, required=True, metavar="CACHE", help="cache folder")
    p.add_argument(
        "--config",
        type=Path,
        help="YAML with `audio` and `data` sections "
        "(default: the xtts mel preset and default text settings)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable), e.g. data.keep_audio=true to keep "
        "the waveforms a vocoder's segments need",
    )
    p.add_argument(
        "--language",
        help="the corpus's language, a BCP-47 code such as fa, de or zh: its cleaners and "
        "number words (overrides data.text.language; default: en)",
    )
    p.add_argument("--workers", type=_positive, help="shards built at once (default: CPU cores)")
    p.add_argument(
        "--layout",
        choices=["auto", "ljspeech", "speaker-folders", "filelist"],
        default="auto",
        help="corpus layout (default: detected)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a cache in CACHE that was built with other settings",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_verify(commands) -> None:
    p = commands.add_parser(
        "verify",
        parents=[verbose_flag()],
        help="check every shard of a cache against its checksums",
        description="Exit 0 when every shard is present and matches the manifest's sha256, "
        "1 naming each missing or damaged shard.",
    )
    p.add_argument("cache", type=Path)


def _add_doctor(commands) -> None:
    p = commands.add_parser(
        "doctor",
        parents=[verbose_flag()],
        help="measure the input pipeline: is it the bottleneck?",
        description="Time the pipeline over a cache (or a WAV corpus, on the fly) alone and "
        "fed to a simulated device that needs --device-ms per batch; print throughput, "
        "batch latency and its variation, device utilization, padding efficiency, the "
        "batch shapes seen and any Python ops in the graph, with a verdict. --segments "
        "measures the vocoder's pipeline instead (make_segment_dataset: random aligned "
        "mel/waveform segments of data.segment_frames frames, from a cache built with "
        "--set data.keep_audio=true).",
    )
    p.add_argument("source", type=Path, help="cache folder, or corpus folder / filelist")
    p.add_argument("--config", type=Path,
                   help="YAML with `audio` and `data` sections (of a cache: only the batching "
                   "keys; its feature settings are the cache's)")  # fmt: skip
    p.add_argument(
        "--segments",
        action="store_true",
        help="the vocoder's segment pipeline (what `xtts-train fit --task vocoder` reads) "
        "instead of the text-to-mel one; SOURCE must be a cache with waveforms",
    )
    p.add_argument("--plan", type=Path, metavar="RUN|FILE",
                   help="a memory plan (a run folder's memory_plan.json, from `xtts-train fit` "
                   "with train.memory_budget_gb, or `xtts-train check --save-plan FILE`): "
                   "print it, and time the pipeline at its batch sizes")  # fmt: skip
    p.add_argument("--split", choices=["train", "val", "all"], default="train")
    p.add_argument("--batches", type=_positive, default=200, help="batches timed (default: 200)")
    p.add_argument("--device-ms", type=float, help="simulated device step per batch, ms")
    p.add_argument("--json", action="store_true", help="print the measurements as JSON")
    p.add_argument("--plot", type=Path, metavar="PNG", help="write batch latency over time")


def _add_serve(commands) -> None:
    p = commands.add_parser(
        "serve",
        parents=[verbose_flag()],
        help="run a tf.data service dispatcher or worker",
        description="Start a tf.data service dispatcher, or a worker that registers with "
        "one, and serve until interrupted. Point a pipeline at the dispatcher with "
        "`data: {service: grpc://HOST:PORT}` in the config.",
    )
    p.add_argument("role", choices=["dispatcher", "worker"])
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: any free)")
    p.add_argument("--dispatcher", help="dispatcher address, for a worker (grpc://host:port)")
    p.add_argument("--work-dir", help="dispatcher journal folder (fault-tolerant mode)")


def _add_demo_corpus(commands) -> None:
    p = commands.add_parser(
        "demo-corpus",
        parents=[verbose_flag()],
        help="write a synthetic speech-like corpus (LJSpeech layout)",
        description="Write a deterministic corpus that needs no download: a small "
        "synthesised language where each character has a sound and a duration. "
        "--engine espeak uses espeak-ng for real synthesised speech instead, in English "
        "or, with --language, from built-in sentences of another language (numbers "
        "written in digits included): the espeak-ng program on PATH, else its library "
        "(the phonemes extra's wheel; XTTS_ESPEAK=wheel prefers it).",
    )
    p.add_argument("out", type=Path, help="new (or empty) folder")
    p.add_argument("--n", type=_positive, default=200, help="utterances (default: 200)")
    p.add_argument("--speakers", type=_positive, default=1,
                   help="speakers, each at its own pitch and rate; with espeak-ng the first "
                   "48 each speak with their own voice variant (default: 1)")  # fmt: skip
    p.add_argument("--held-out-speakers", type=int, default=0, metavar="K",
                   help="write the last K voices to OUT/held-out/ (a corpus of the same "
                   "layout) instead of OUT: voices a model trained on OUT never heard "
                   "(default: 0)")  # fmt: skip
    p.add_argument("--engine", choices=["synth", "espeak"], default="synth")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-seconds", type=float, default=1.0)
    p.add_argument("--max-seconds", type=float, default=10.0)
    p.add_argument("--one-sentence", action="store_true",
                   help="English: every text is one sentence, its clauses joined by commas "
                   "where sentences would end (long single sentences, e.g. longer than a "
                   "model's training clips)")  # fmt: skip
    p.add_argument("--texts", choices=DEMO_TEXTS, default="sentences", metavar="KIND",
                   help="English: what a text is (default: sentences): run-on (one sentence, "
                   "no punctuation but its final period, clauses joined by plain words such "
                   "as 'and', 'then', 'while'), repeated (one word over and over, distinct "
                   "words with no commas, or numbers in digits, drawn per text) or short (one "
                   "or two words, 'Yes.', 'Thank you.'). Run-on and repeated texts fill "
                   "--min-seconds..--max-seconds as sentences do; a short phrase is as long as "
                   "it is, padded with silence to --min-seconds (pass e.g. 0.1 for the phrase "
                   "alone), and needs --max-seconds >= 2. Not with --one-sentence")  # fmt: skip
    p.add_argument(
        "--language",
        default="en",
        help=f"language of the texts: {', '.join(DEMO_LANGUAGES)} (default: en); any "
        "but en needs --engine espeak",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, received {text}")
    return value


# Each handler imports what it runs: building the parser (and `--help`) must not load
# TensorFlow, which takes seconds, and `main` quiets TensorFlow before it loads. Not an
# import cycle.


def _run_prepare(args) -> int:
    from xtts_data.cache import format_summary, prepare
    from xtts_data.config import load_config
    from xtts_data.corpus import read_corpus

    audio, data = load_config(args.config, args.set)
    if args.language is not None:
        text = dataclasses.replace(data.text, language=args.language)
        data = dataclasses.replace(data, text=text)
    corpus = read_corpus(args.corpus, layout=args.layout)
    result = prepare(
        corpus,
        args.out,
        audio=audio,
        data=data,
        workers=args.workers,
        overwrite=args.overwrite,
        progress=not args.quiet,
    )
    print(format_summary(result))
    return 0


def _run_verify(args) -> int:
    from xtts_data.verify import verify_cache

    problems = verify_cache(args.cache)
    for problem in problems:
        print(f"{args.cache}: {problem}")
    if not problems:
        print(f"{args.cache}: intact")
    return 1 if problems else 0


def _run_doctor(args) -> int:
    from xtts_data.config import load_config
    from xtts_data.doctor import diagnose, plot
    from xtts_data.manifest import FeatureCache, Manifest
    from xtts_data.pipeline import make_dataset
    from xtts_data.plan import read_plan
    from xtts_data.segments import make_segment_dataset

    # A corpus has no build settings.
    built = Manifest.read(args.source).settings if FeatureCache.is_cache(args.source) else None
    audio, data = load_config(args.config, built=built)
    plan = None
    if args.plan is not None:
        if args.segments:
            raise XttsDataError("--plan sizes the text-to-mel buckets; the segment pipeline "
                                "has one shape: pass one of --plan and --segments")  # fmt: skip
        plan = read_plan(args.plan)
        data = dataclasses.replace(data, policy="buckets", batch_sizes=plan.batch_sizes,
                                   num_buckets=len(plan.batch_sizes))  # fmt: skip
    make = make_segment_dataset if args.segments else make_dataset
    pipeline = make(args.source, data, args.split, audio=audio, repeat=True)
    if plan is not None:
        _check_plan(plan, pipeline.spec, args.plan)
    report = diagnose(pipeline, batches=args.batches, device_ms=args.device_ms)
    values = report.to_dict()
    if args.plot:
        plot(report, args.plot)
    if args.json:
        if plan is not None:
            values["memory_plan"] = dataclasses.asdict(plan)
        print(json.dumps(values, indent=1))
        return 0
    if plan is not None:
        print(plan.format())
    for name, text in _doctor_lines(pipeline, values, segments=args.segments):
        print(f"{name:<19}{text}")
    return 0


def _check_plan(plan, spec, source: Path) -> None:
    """Refuse a plan made for other buckets than the pipeline's."""
    buckets = [(shape.frames, shape.text_len) for shape in spec.shapes]
    if buckets != plan.buckets:
        raise XttsDataError(
            f"Expected a plan for this pipeline's buckets (frames, text) {buckets}, received: "
            f"{source} planned {plan.buckets}; pass the config the plan was made with "
            f"(--config RUN/config.yaml)"
        )


def _doctor_lines(pipeline, values: dict, *, segments: bool) -> list[tuple[str, str]]:
    """(name, text) of each line `doctor` prints for a text-to-mel or segment pipeline."""
    dropped = "too short for a segment" if segments else "too long"
    axes = "batch, frames, samples" if segments else "batch, text, frames"
    lines = [
        ("source", f"{pipeline.source} ({pipeline.split}: {pipeline.num_samples} utterances, "
                   f"{pipeline.filtered} {dropped})"),
        ("throughput", f"{values['samples_per_s']:.0f} samples/s, "
                       f"{values['cpu_ms_per_sample']:.2f} CPU-ms per sample"),
        ("batch latency", f"mean {values['batch_ms_mean']:.2f} ms, p99 "
                          f"{values['batch_ms_p99']:.2f} ms, CV {values['batch_ms_cv']:.2f}"),
    ]  # fmt: skip
    busy = values["device_utilization"]
    if busy is not None:
        lines.append(("device utilization", f"{busy:.1%} at {values['device_ms']:g} ms/batch"))
    if not segments:  # a segment's frames are all real
        lines.append(("padding efficiency", f"{values['padding_efficiency']:.1%}"))
    lines += [
        ("shapes", f"{len(values['shapes'])} seen of {len(values['spec_shapes'])} in the spec "
                   f"({axes}): {values['shapes']}"),
        ("python ops", f"{values['python_ops'] or 'none'}"),
        ("verdict", values["verdict"]),
    ]  # fmt: skip
    return lines


def _run_serve(args) -> int:
    from xtts_data.service import start_dispatcher, start_worker

    if args.role == "worker":
        if not args.dispatcher:
            raise XttsDataError("a worker needs --dispatcher grpc://HOST:PORT")
        server = start_worker(args.dispatcher, port=args.port)
        print(f"worker serving for {args.dispatcher} (Ctrl-C to stop)", flush=True)
    else:
        server = start_dispatcher(port=args.port, work_dir=args.work_dir)
        print(f"dispatcher at {server.target} (Ctrl-C to stop)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.join()
    return 0


def _run_demo_corpus(args) -> int:
    from xtts_data.demo_corpus import write_demo_corpus

    corpus = write_demo_corpus(
        args.out,
        n=args.n,
        speakers=args.speakers,
        held_out_speakers=args.held_out_speakers,
        engine=args.engine,
        seed=args.seed,
        min_seconds=args.min_seconds,
        max_seconds=args.max_seconds,
        language=args.language,
        one_sentence=args.one_sentence,
        texts=args.texts,
        progress=True,
    )
    print(
        f"wrote {corpus.num_utterances} utterances ({corpus.total_seconds / 60:.1f} min, "
        f"{corpus.speakers} speaker(s)) to {corpus.path}"
        + (f"; voices {', '.join(corpus.held_out)} held out, in {corpus.path / 'held-out'}"
           if corpus.held_out else "")
    )  # fmt: skip
    if args.language != "en":
        print(f"prepare it with: xtts-data prepare {corpus.path} --out CACHE --language "
              f"{args.language}")  # fmt: skip
    return 0


_COMMANDS = {
    "prepare": _run_prepare,
    "verify": _run_verify,
    "doctor": _run_doctor,
    "serve": _run_serve,
    "demo-corpus": _run_demo_corpus,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `xtts-data` console script."""
    args = _parser().parse_args(argv)
    start_cli(verbose=args.verbose, console=argv is None)
    return run_command(_COMMANDS[args.command], args, prog="xtts-data", user_errors=_USER_ERRORS)


if __name__ == "__main__":
    sys.exit(main())
