"""Training memory and step time of the self-attention against the frames: the dense
product beside query blocks recomputed in the backward pass (`model.attention_block`).

For each frame count, a fresh process (TensorFlow's thread pools are set once per process)
builds one train step per block setting as `fit` does (`build_steps`, one static shape of
`batch_size` x `text_len` x frames), warms each up and runs it once untimed, then times
`steps` rounds, each running every setting once in turn, so the machine's noise falls on
all of them alike. A step's memory is the TensorFlow allocator's peak during it less what
was live before it (weights, optimizer state, the batch): its own working memory
(`tf.config.experimental.get_memory_info`); the largest over the rounds is reported.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import tensorflow as tf

import xtts_data as xd
from xtts_bench.errors import SettingsError
from xtts_bench.train import configure_threads
from xtts_train import (
    build_steps,
    dummy_batch,
    kept_dtype_policy,
    load_stack_config,
    measuring_pool,
    timed_step,
)

__all__ = ["format_attention_table", "run_attention_benchmark"]


def run_attention_benchmark(
    *, frames: Sequence[int] = (256, 512, 1024), blocks: Sequence[int] = (0, 128),
    batch_size: int = 8, text_len: int = 64, steps: int = 9, threads: int = 2,
    overrides: Sequence[str] = (),
) -> dict:  # fmt: skip
    """Every (frames, block) in its own process; returns one row each.

    Args:
        frames: decoder frames of the batches; blocks: `model.attention_block` values
            (0: dense).
        batch_size, text_len: the rest of the batch shape.
        steps: timed rounds (median); threads: TensorFlow's intra- and inter-op threads.
        overrides: `section.key=value` settings applied before `model.attention_block`.

    Raises:
        SettingsError: a count below 1, or a block below 0.
    """
    for name, value in (("batch_size", batch_size), ("text_len", text_len), ("steps", steps),
                        ("threads", threads), *(("frames", f) for f in frames)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SettingsError(f"Expected {name} an int >= 1, received: {name}={value!r}")
    if any(isinstance(b, bool) or not isinstance(b, int) or b < 0 for b in blocks):
        raise SettingsError(f"Expected blocks ints >= 0, received: blocks={list(blocks)}")
    load_stack_config(None, overrides)  # bad settings fail here, not in a child
    rows = []
    for count in frames:
        with measuring_pool() as pool:
            rows += pool.apply(_measure, (count, tuple(blocks), batch_size, text_len, steps,
                                          threads, tuple(overrides)))  # fmt: skip
    return {"batch_size": batch_size, "text_len": text_len, "threads": threads,
            "overrides": list(overrides), "rows": rows}  # fmt: skip


def _measure(frames: int, blocks: tuple[int, ...], batch_size: int, text_len: int, steps: int,
             threads: int, overrides: tuple[str, ...]) -> list[dict]:  # fmt: skip
    """Every block setting at `frames`, in a fresh process, interleaved."""
    configure_threads(threads)
    compiled, stack = {}, None
    for block in blocks:
        stack = load_stack_config(None, [*overrides, f"model.attention_block={block}"])
        shape = xd.BatchShape(frames=frames, text_len=text_len, batch_size=batch_size)
        spec = xd.DatasetSpec(shapes=(shape,), n_mels=stack.model.n_mels,
                              cond_frames=stack.data.cond_frames)  # fmt: skip
        with kept_dtype_policy():
            compiled[block] = build_steps(stack, spec)
            compiled[block].warm_up(workers=1, defer_cached=False)
    batch = dummy_batch(stack.model, batch_size=batch_size, text_len=text_len, frames=frames,
                        cond_frames=stack.data.cond_frames)  # fmt: skip
    seconds = {block: [] for block in blocks}
    peaks = dict.fromkeys(blocks, 0)
    for round_ in range(steps + 1):  # round 0: the first call after the warm-up, untimed
        for block in blocks:
            live = tf.config.experimental.get_memory_info("CPU:0")["current"]
            tf.config.experimental.reset_memory_stats("CPU:0")
            took = timed_step(compiled[block].train, batch, step=0)[0]
            peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
            if round_:
                seconds[block].append(took)
                peaks[block] = max(peaks[block], peak - live)
    return [{"frames": frames, "block": block, "compiler": stack.train.compiler,
             "step_ms": 1e3 * statistics.median(seconds[block]),
             "step_mib": peaks[block] / 2**20} for block in blocks]  # fmt: skip


def format_attention_table(result: dict) -> str:
    """One row per (frames, block): step time and working memory, each beside the dense
    product's at the same frames, and the memory's growth from the previous frame count."""
    rows = result["rows"]
    dense = {r["frames"]: r for r in rows if r["block"] == 0}
    previous: dict[int, dict] = {}
    lines = [f"batch {result['batch_size']} x text {result['text_len']}, "
             f"{result['threads']} threads, {' '.join(result['overrides']) or 'defaults'}",
             f"{'frames':>7}{'block':>7}{'step ms':>9}{'x dense':>9}{'step MiB':>10}"
             f"{'x dense':>9}{'growth':>8}"]  # fmt: skip
    for row in rows:
        base, before = dense.get(row["frames"]), previous.get(row["block"])
        growth = f"{row['step_mib'] / before['step_mib']:.2f}x" if before else ""
        time_ratio = f"{row['step_ms'] / base['step_ms']:.2f}" if base else ""
        memory_ratio = f"{row['step_mib'] / base['step_mib']:.2f}" if base else ""
        block = row["block"] or "dense"
        lines.append(f"{row['frames']:>7}{block:>7}{row['step_ms']:>9.0f}{time_ratio:>9}"
                     f"{row['step_mib']:>10.0f}{memory_ratio:>9}{growth:>8}")  # fmt: skip
        previous[row["block"]] = row
    return "\n".join(lines)
