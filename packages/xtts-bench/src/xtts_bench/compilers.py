"""XLA against TensorFlow's graph executor, per role, per thread count: the measurement
behind `xtts_train.compile.compiler.AUTO`.

For each thread count and each compiler, a fresh process pinned to that many cores
(`os.sched_setaffinity`, intra- and inter-op threads alike) builds the steps as `fit`
does (`build_steps` with `train.compiler` set), warms every shape of the spec up (timed:
trace, compile), then times, for every shape, `steps` train steps and `steps` eval steps
(median, after one untimed), and the decoding loop over a `decode_frames` buffer with the
stop token held off (median of `decode_repeats` calls after the first, which traces and
compiles). One process per configuration: TensorFlow's thread pools are set once per
process, and a compiled program is never freed.

Beside the times, each child measures its cores' float32 matmul peak (a 1024 x 1024
graph-mode matmul) and counts the train step's floating-point operations from its graph
(TensorFlow's profiler: MatMul, BatchMatMul, Conv2D and the rest with registered
statistics), so the table gives each step's model FLOPs utilisation (MFU): FLOPs per
step / step time / peak.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import pathlib
import statistics
import sys
import tempfile
import time

import tensorflow as tf
import tqdm

from xtts_bench.decode import hold_stop_off
from xtts_bench.settings import CompilerBenchConfig
from xtts_bench.train import configure_threads, read_inputs, write_cache
from xtts_data import DatasetSpec
from xtts_train import Decoding, build_steps, kept_dtype_policy, timed_step

__all__ = ["format_compiler_table", "matmul_peak_flops", "run_compiler_benchmark", "step_flops"]

COMPILERS = ("xla", "graph")


def run_compiler_benchmark(config: CompilerBenchConfig, *, progress: bool = False) -> dict:
    """Every (threads, compiler) in its own process; returns the figures and the choice
    per role and thread count (the faster compiler)."""
    with tempfile.TemporaryDirectory(prefix="xtts-bench-compiler-") as folder:
        corpus = config.train_bench(max(config.threads))  # prepare's workers
        cache = config.data or write_cache(corpus, pathlib.Path(folder))
        context = multiprocessing.get_context("spawn")
        runs = []
        for threads in config.threads:
            for compiler in COMPILERS:
                if progress:
                    message = f"measuring {compiler} on {threads} thread(s) ..."
                    tqdm.tqdm.write(message, file=sys.stderr)
                with context.Pool(1) as pool:
                    runs.append(pool.apply(_measure, (config, str(cache), threads, compiler)))
    return {
        "settings": {k: str(v) for k, v in dataclasses.asdict(config).items()},
        "runs": runs,
        "choice": _choices(runs),
        "tensorflow": tf.__version__,
        "cpus": os.cpu_count(),
    }


def _choices(runs: list[dict]) -> dict[str, dict[str, str]]:
    """Per thread count and role, the compiler with the smaller time (summed over shapes)."""
    choice: dict[str, dict[str, str]] = {}
    for threads in sorted({r["threads"] for r in runs}):
        by = {r["compiler"]: r for r in runs if r["threads"] == threads}
        choice[str(threads)] = {
            role: min(by, key=lambda c: _role_seconds(by[c], role))
            for role in ("train", "eval", "decode")
        }
    return choice


def _role_seconds(run: dict, role: str) -> float:
    if role == "decode":
        return run["decode"]["ms"]
    return sum(run[f"{role}_ms"].values())


def _measure(config: CompilerBenchConfig, cache: str, threads: int, compiler: str) -> dict:
    """One configuration, in a fresh process (see the module docstring)."""
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:threads]))
    configure_threads(threads)
    inputs = read_inputs(config.train_bench(threads), pathlib.Path(cache))
    train = dataclasses.replace(inputs.stack.train, compiler=compiler, compile_workers=1)
    stack = dataclasses.replace(inputs.stack, train=train)
    firsts = {}
    for batch in inputs.batches:  # one batch of each shape the draw holds
        firsts.setdefault(DatasetSpec.key_of(batch), batch)
    with kept_dtype_policy():
        steps = build_steps(stack, inputs.spec, eval_spec=inputs.spec)
        warm = steps.warm_up(workers=1, defer_cached=False)
        train_ms, eval_ms = {}, {}
        for shape, batch in sorted(firsts.items()):
            key = "x".join(map(str, shape))
            train_ms[key] = _median_ms(lambda b=batch: timed_step(steps.train, b, step=0)[0],
                                       config.steps)  # fmt: skip
            eval_ms[key] = _median_ms(lambda b=batch: _timed_eval(steps, b), config.steps)
        flops = {"x".join(map(str, s)): step_flops(steps, s) for s in sorted(firsts)}
        decode = _decode(steps, stack, next(iter(firsts.values())), config, compiler)
    return {
        "threads": threads, "compiler": compiler, "warm_up": warm.to_dict(),
        "train_ms": train_ms, "eval_ms": eval_ms, "decode": decode,
        "train_flops": flops, "matmul_peak_flops": matmul_peak_flops(),
    }  # fmt: skip


def _median_ms(run, repeats: int) -> float:
    run()  # untimed: the first call after warm-up
    return 1e3 * statistics.median(run() for _ in range(repeats))


def _timed_eval(steps, batch) -> float:
    started = time.perf_counter()
    float(steps.evaluate(batch)["loss"])
    return time.perf_counter() - started


def _decode(steps, stack, batch, config: CompilerBenchConfig, compiler: str) -> dict:
    """The decoding loop of one row over the whole buffer (stop token held off)."""
    model = steps.model
    hold_stop_off(model)
    decoding = Decoding(model, decode=stack.decode, cond_frames=stack.reference_frames,
                        max_frames=config.decode_frames, compiler=compiler)  # fmt: skip
    length = int(batch["token_lengths"][0])
    rows = [batch["tokens"][0, :length].numpy().tolist()]
    reference = batch["cond_mel"][0].numpy()
    started = time.perf_counter()
    decoding(rows, reference)
    first = time.perf_counter() - started
    walls = []
    for _ in range(config.decode_repeats):
        started = time.perf_counter()
        decoding(rows, reference)
        walls.append(time.perf_counter() - started)
    wall = statistics.median(walls)
    audio = config.decode_frames * stack.audio.hop_length / stack.audio.sample_rate
    return {"first_s": first, "ms": 1e3 * wall, "rtf": audio / wall}


def step_flops(steps, shape: tuple[int, int, int]) -> float:
    """Floating-point operations of one train step at `shape`, counted on its traced graph
    by TensorFlow's profiler (ops without registered statistics count 0: a lower bound
    dominated by the matmuls and convolutions)."""
    from tensorflow.python.profiler import model_analyzer, option_builder

    program = steps.program(shape)
    options = (
        option_builder.ProfileOptionBuilder(option_builder.ProfileOptionBuilder.float_operation())
        .with_empty_output()
        .build()
    )
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")  # the v1 profiler's deprecation notices, once per op kind
    try:
        return float(model_analyzer.profile(program.graph, options=options).total_float_ops)
    finally:
        logger.setLevel(level)


def matmul_peak_flops(n: int = 1024, repeats: int = 10) -> float:
    """Float32 FLOP/s of an `n x n` matmul on this process's threads (best of `repeats`)."""
    a = tf.random.normal([n, n])
    matmul = tf.function(lambda x: tf.linalg.matmul(x, x))
    matmul(a).numpy()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        matmul(a).numpy()
        best = min(best, time.perf_counter() - started)
    return 2 * n**3 / best


def format_compiler_table(result: dict) -> str:
    """Per thread count and role: XLA and graph times, their ratio, the faster one; the
    train step's MFU; warm-up seconds."""
    runs = {(r["threads"], r["compiler"]): r for r in result["runs"]}
    lines = [f"{'threads':>7}  {'role':<7}{'xla ms':>9}{'graph ms':>10}{'xla/graph':>11}"
             f"  faster"]  # fmt: skip
    for threads, choice in result["choice"].items():
        xla, graph = runs[(int(threads), "xla")], runs[(int(threads), "graph")]
        for role in ("train", "eval", "decode"):
            x, g = _role_seconds(xla, role), _role_seconds(graph, role)
            lines.append(f"{threads:>7}  {role:<7}{x:>9.1f}{g:>10.1f}{x / g:>10.2f}x"
                         f"  {choice[role]}")  # fmt: skip
    lines.append("")
    lines.append(f"{'threads':>7}  {'compiler':<9}{'warm-up s':>10}{'GFLOP/step':>11}"
                 f"{'peak GFLOP/s':>13}{'MFU':>7}")  # fmt: skip
    for (threads, compiler), run in sorted(runs.items()):
        flops = sum(run["train_flops"].values())
        seconds = sum(run["train_ms"].values()) / 1e3
        peak = run["matmul_peak_flops"]
        lines.append(f"{threads:>7}  {compiler:<9}{run['warm_up']['seconds']:>10.1f}"
                     f"{flops / len(run['train_flops']) / 1e9:>11.2f}{peak / 1e9:>13.1f}"
                     f"{flops / seconds / peak:>7.1%}")  # fmt: skip
    return "\n".join(lines)
