"""`gta`: a text-to-mel run's ground-truth-aligned frames of a cache, written as a cache a
vocoder fine-tunes on (`fit --task vocoder --data OUT --init-from VOCODER_RUN`).

The frames are `xtts_train.inference.aligned.AlignedFrames`' (teacher-forced, every
dropout off); the cache is `xtts_data.derive_mels`' copy of the source with them in place
of the mels: verified, resumable, its waveforms and everything else byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import xtts_data as xd
from xtts_train.errors import XttsTrainError
from xtts_train.inference.aligned import AlignedFrames
from xtts_train.runs.loading import latest_step, load_run

__all__ = ["write_aligned_frames"]


def write_aligned_frames(run: str | Path, data: str | Path, out: str | Path, *,
                         step: int | None = None, progress: bool = True) -> Path:  # fmt: skip
    """Write `data` (a cache) to `out` with each mel replaced by `run`'s teacher-forced
    frames of it (the checkpoint of `step`, default the last).

    Raises:
        XttsTrainError: a run that is not a text-to-mel run, a cache of other audio settings
            or of another symbol table than the run's, or `out` holding other frames.
    """
    stack, model, tokenizer = load_run(run, step=step)
    cache = xd.FeatureCache.open(data)
    if cache.audio != stack.audio:
        raise XttsTrainError(f"{data} was built with other audio settings than {run} was "
                             f"trained with ({cache.audio} vs {stack.audio})")  # fmt: skip
    if cache.tokenizer != tokenizer:
        raise XttsTrainError(f"{data}'s symbol table is not {run}'s: its token ids would mean "
                             f"other symbols to the model; use the cache the run trained on, "
                             f"or one prepared with the run's tokenizer")  # fmt: skip
    origin = {"run": str(Path(run).resolve()), "step": step or latest_step(run)}
    frames = AlignedFrames(stack, model)
    return xd.derive_mels(data, out, frames, origin=origin, progress=progress)
