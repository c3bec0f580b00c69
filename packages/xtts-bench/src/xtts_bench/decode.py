"""Decoding speed: real-time factor of compiled free-running synthesis.

The run's model decodes a fixed sentence into a `frames` buffer with the stop token held
off (its bias set to -20, the weights otherwise the run's), so every configuration
decodes the same number of frames: audio seconds of the buffer / wall seconds of the
compiled call, compile and first call outside the timing.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

from xtts_bench.errors import SettingsError
from xtts_data import text_to_ids
from xtts_train import Decoding, load_reference, load_run

__all__ = ["SENTENCE", "format_decode_table", "hold_stop_off", "run_decode_benchmark"]

SENTENCE = "The birch canoe slid on the smooth planks."


def hold_stop_off(model) -> None:
    """Set the stop head's bias to -20, so the model never stops and every decoding call
    fills its whole buffer (the weights otherwise unchanged)."""
    model.stop_head.bias.assign(np.full(model.stop_head.bias.shape, -20.0, np.float32))


def run_decode_benchmark(runs: list[Path], *, frames: int = 256, batch_size: int = 1,
                         repeats: int = 5) -> dict:  # fmt: skip
    """Real-time factor of each run's compiled decoding, side by side.

    Raises:
        SettingsError: `repeats` is not an int >= 1 (`frames` and `batch_size` are
            checked by `xtts_train.models.text_to_mel.decoding.Decoding`).
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise SettingsError(f"Expected repeats an int >= 1, received: repeats={repeats!r}")
    results = []
    for run in runs:
        stack, model, tokenizer = load_run(run)
        hold_stop_off(model)
        decoding = Decoding(model, decode=stack.decode, cond_frames=stack.reference_frames,
                            max_frames=frames,
                            batch_size=batch_size, compiler=stack.train.compiler)  # fmt: skip
        rows = [text_to_ids(SENTENCE, stack.data.text, tokenizer)[0]] * batch_size
        reference = load_reference(run, stack)
        decoding(rows, reference)  # trace, compile, first call
        walls = []
        for _ in range(repeats):
            start = time.perf_counter()
            decoding(rows, reference)
            walls.append(time.perf_counter() - start)
        audio = frames * batch_size * stack.audio.hop_length / stack.audio.sample_rate
        wall = statistics.median(walls)
        results.append({"run": str(run), "reduction_factor": stack.model.reduction_factor,
                        "frames": frames, "batch_size": batch_size, "wall_s": wall,
                        "rtf": audio / wall})  # fmt: skip
    return {"runs": results}


def format_decode_table(result: dict) -> str:
    """One row per run: r, buffer, batch, median wall time, real-time factor."""
    head = f"{'r':>3}{'frames':>8}{'batch':>7}{'wall s':>9}{'RTF':>7}  run"
    rows = [
        f"{r['reduction_factor']:>3}{r['frames']:>8}{r['batch_size']:>7}{r['wall_s']:>9.2f}"
        f"{r['rtf']:>7.2f}  {r['run']}"
        for r in result["runs"]
    ]
    return "\n".join([head, *rows])
