"""`xtts-bench runtime`: an exported voice spoken by onnxruntime and by LiteRT
(`xtts_runtime`) beside the run spoken by TensorFlow (graph and XLA), on the same texts
and machine.

Every runtime runs in a process of its own per thread count (`_speaker`), one after
another: the cold start is the parent's clock from starting the process to its first
audio (imports, loading, compiling and the first text's first piece); the speed is the
median of `repeats` calls per text after a warm-up call, as a real-time factor (wall
seconds per second of audio: below 1 is faster than real time); memory is the process's
peak RSS. The install size is that of each venv's `site-packages`.

TensorFlow's path is `synthesize`'s: a text's pieces decoded side by side (`Decoding`),
joined, vocoded (`Waveforms`); its first audio `synthesize --stream`'s (`Streaming`,
`Waveforms.stream`). The runtime's is `Voice.stream`, piece after piece; its first audio
`Voice.chunks`'.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import tqdm

from xtts_audio.startup import verbose_flag
from xtts_bench.errors import SettingsError

__all__ = ["RUNTIMES", "TEXTS", "add_runtime_parser", "format_runtime_table", "run_runtime",
           "run_runtime_benchmark", "venv_size_mb"]  # fmt: skip

TEXTS = (
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background, then hold it flat until the paste is dry.",
)
RUNTIMES = ("onnx", "litert", "tf-graph", "tf-xla")


def run_runtime_benchmark(run: pathlib.Path, vocoder: pathlib.Path, *,
                          voice: pathlib.Path | None = None,
                          lite_voice: pathlib.Path | None = None,
                          threads: tuple[int, ...] = (1, 2),
                          runtimes: tuple[str, ...] = RUNTIMES, repeats: int = 3,
                          runtime_venv: pathlib.Path | None = None,
                          progress: bool = True) -> dict:  # fmt: skip
    """Each runtime at each thread count speaking `TEXTS`, side by side.

    Args:
        run: a text-to-mel run; vocoder: a vocoder run on its audio settings.
        voice: the run's voice folder (`xtts-train export --format onnx`); None: exported
            here first, into a temporary folder.
        lite_voice: the same as LiteRT programs (`--format litert`); None: likewise.
        threads: the thread counts (each runtime's intra-op threads).
        runtimes: of `RUNTIMES`.
        repeats: timed calls per text.
        runtime_venv: a venv with xtts-runtime installed and no TensorFlow, whose size is
            reported beside this one's (TensorFlow's).

    Raises:
        SettingsError: an unknown runtime, a thread count or `repeats` below 1.
    """
    _check(threads=threads, runtimes=runtimes, repeats=repeats)
    results: dict = {"cores": len(os.sched_getaffinity(0)), "texts": list(TEXTS),
                     "runs": []}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="xtts-bench-runtime-") as tmp:
        if voice is None and "onnx" in runtimes:
            voice = _export(run, vocoder, pathlib.Path(tmp) / "voice", programs="onnx")
        if lite_voice is None and "litert" in runtimes:
            lite_voice = _export(run, vocoder, pathlib.Path(tmp) / "lite", programs="litert")
        folders = {"onnx": str(voice), "litert": str(lite_voice)}
        sample_rate = _sample_rate(run)
        jobs = [{"runtime": name, "threads": n, "run": str(run), "vocoder": str(vocoder),
                 "voice": folders.get(name), "compiler": name.removeprefix("tf-"),
                 "texts": list(TEXTS), "repeats": repeats, "sample_rate": sample_rate}
                for n in threads for name in runtimes]  # fmt: skip
        for job in tqdm.tqdm(jobs, desc="runtimes", unit="process", disable=not progress):
            results["runs"].append({"runtime": job["runtime"], "threads": job["threads"],
                                    **_speak(job)})  # fmt: skip
    results["venv_mb"] = {"tensorflow": venv_size_mb(pathlib.Path(sys.prefix))}
    if runtime_venv is not None:
        results["venv_mb"]["runtime"] = venv_size_mb(runtime_venv)
    return results


def _check(*, threads, runtimes, repeats) -> None:
    unknown = [name for name in runtimes if name not in RUNTIMES]
    if unknown or not runtimes:
        raise SettingsError(f"Expected runtimes of {list(RUNTIMES)}, received: {list(runtimes)}")
    for name, value in [("repeats", repeats), *(("threads", n) for n in threads)]:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SettingsError(f"Expected {name} an int >= 1, received: {name}={value!r}")


def _export(run: pathlib.Path, vocoder: pathlib.Path, out: pathlib.Path, *,
            programs: str) -> pathlib.Path:  # fmt: skip
    command = [sys.executable, "-m", "xtts_train.cli", "export", "--format", programs,
               "--run", str(run), "--vocoder", str(vocoder), "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    return out


def _sample_rate(run: pathlib.Path) -> int:
    from xtts_train import load_stack_config

    return load_stack_config(run / "config.yaml").audio.sample_rate


def _speak(job: dict) -> dict:
    """A `_speaker` process's figures, and its cold start to first audio. Its stderr goes
    to a file: a pipe nobody reads while stdout is read could fill and stall it."""
    command = [sys.executable, "-m", "xtts_bench._speaker", json.dumps(job)]
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as errors, subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, text=True,
            env=environment) as process:  # fmt: skip
        lines = []
        for line in process.stdout:
            lines.append(json.loads(line))
            if lines[-1]["event"] == "first":
                cold = time.perf_counter() - start
        process.wait()
        errors.seek(0)
        said = errors.read()
    if process.returncode or not lines or lines[-1]["event"] != "done":
        raise RuntimeError(f"{job['runtime']} ({job['threads']} threads) failed:\n{said[-4000:]}")
    return {"cold_start_s": cold, **{k: v for k, v in lines[-1].items() if k != "event"}}


def venv_size_mb(prefix: pathlib.Path) -> float:
    """MB on disk of the `site-packages` folders under a venv's `prefix`."""
    total = 0
    for site in prefix.glob("lib/python*/site-packages"):
        for path in site.rglob("*"):
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
    return total / 1e6


def format_runtime_table(result: dict) -> str:
    """One row per runtime and thread count: cold start, RTF and first audio per text,
    peak RSS; then the venv sizes."""
    head = f"{'runtime':<10}{'threads':>8}{'cold s':>8}"
    for i in range(len(result["texts"])):
        head += f"{f'RTF {i + 1}':>8}{f'first {i + 1}':>9}"
    lines = [head + f"{'RSS MB':>8}"]
    for r in result["runs"]:
        row = f"{r['runtime']:<10}{r['threads']:>8}{r['cold_start_s']:>8.1f}"
        for text in r["texts"]:
            row += f"{text['rtf']:>8.3f}{text['first_audio_s']:>9.3f}"
        lines.append(row + f"{r['peak_rss_mb']:>8.0f}")
    lines += [f"text {i + 1}: {text}" for i, text in enumerate(result["texts"])]
    lines += [f"venv {name}: {mb:.0f} MB" for name, mb in result["venv_mb"].items()]
    return "\n".join(lines)


def add_runtime_parser(commands) -> argparse.ArgumentParser:
    """`runtime` under `commands` (the CLI's subparsers)."""
    p = commands.add_parser(
        "runtime", parents=[verbose_flag()],
        help="an exported voice on onnxruntime and LiteRT beside the run on TensorFlow "
        "(graph, XLA)",
        description=(
            "Speak the same texts with each runtime in a process of its own per thread "
            "count: onnxruntime over the run's exported voice folder (exported first "
            "unless --voice names it), LiteRT over its LiteRT export (likewise, "
            "--lite-voice), TensorFlow's graph executor and XLA over the run. "
            "Reports the cold start to first audio, the real-time factor (wall seconds "
            "per audio second; the median of --repeats calls after a warm-up call) and "
            "the first audio of each text, the peak RSS, and the size of each venv."
        ),
    )  # fmt: skip
    p.add_argument("run", type=pathlib.Path, metavar="RUN", help="a text-to-mel run")
    p.add_argument("--vocoder", type=pathlib.Path, required=True,
                   help="a vocoder run on the run's audio settings")  # fmt: skip
    p.add_argument("--voice", type=pathlib.Path,
                   help="the run's exported voice folder (default: exported first)")  # fmt: skip
    p.add_argument("--lite-voice", type=pathlib.Path,
                   help="the run's voice exported with --format litert (default: exported "
                   "first)")  # fmt: skip
    p.add_argument("--threads", default="1,2",
                   help="comma-separated thread counts (default: 1,2)")  # fmt: skip
    p.add_argument("--runtimes", default=",".join(RUNTIMES),
                   help=f"comma-separated, of {', '.join(RUNTIMES)} (default: all)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=3, help="timed calls per text (default: 3)")
    p.add_argument("--runtime-venv", type=pathlib.Path,
                   help="a venv with xtts-runtime and no TensorFlow, to size beside this "
                   "one")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p


def run_runtime(args) -> str | dict:
    """The `runtime` command: the figures as JSON or a table."""
    try:
        threads = tuple(int(n) for n in args.threads.split(","))
    except ValueError:
        raise SettingsError(f"Expected --threads as comma-separated ints, received: "
                            f"{args.threads!r}") from None  # fmt: skip
    result = run_runtime_benchmark(args.run, args.vocoder, voice=args.voice,
                                   lite_voice=args.lite_voice, threads=threads,
                                   runtimes=tuple(args.runtimes.split(",")),
                                   repeats=args.repeats, runtime_venv=args.runtime_venv,
                                   progress=not args.json)  # fmt: skip
    return result if args.json else format_runtime_table(result)
