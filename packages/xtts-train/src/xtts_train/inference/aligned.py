"""Ground-truth-aligned frames: what a text-to-mel run predicts for each frame of a
recording, teacher-forced (from the recorded frames before it), for a vocoder to fine-tune
on (HiFi-GAN's recipe). The vocoder then learns the acoustic model's frames, which are
smoother than the recordings', against the recordings' own samples: frame `i` of the
prediction stands where frame `i` of the recording stood, over samples `i * hop_length`.

Every dropout is off (the prenet's too, as in free-running decoding), so the frames are a
function of the weights and the utterance alone. The voice clip is the centre
`data.cond_frames` frames of the utterance's own recording (deterministic; training draws
it from another of the speaker's utterances). Utterances are padded to a few static
shapes (`padded_length`: steps of about √2), one compiled program each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

import xtts_data as xd
from xtts_train.compile.compiler import resolve
from xtts_train.config import StackConfig
from xtts_train.models.text_to_mel.model import TextToMel

__all__ = ["AlignedFrames", "padded_length"]


def padded_length(n: int, *, floor: int) -> int:
    """The smallest of `floor`, `floor * √2`, `2 * floor`, ... (each rounded up to a
    multiple of 8) that holds `n`: at most ~41% padding, few shapes."""
    k = max(0, math.floor(2 * math.log2(max(n, 1) / floor)))
    while (length := -(-math.ceil(floor * 2 ** (k / 2)) // 8) * 8) < n:
        k += 1
    return length


class AlignedFrames:
    """The teacher-forced frames (`mel_after`, float32 [F, n_mels]) of utterances of a
    cache, by a text-to-mel run's model.

    Args:
        stack: the run's config (`data.cond_frames`, `train.compiler`).
        model: its `TextToMel`, weights restored.

    Attributes:
        traces: programs traced (one per padded (text, frames) shape).
    """

    def __init__(self, stack: StackConfig, model: TextToMel) -> None:
        self.model, self.cond_frames = model, stack.data.cond_frames
        self.traces = 0
        self._xla = resolve(stack.train.compiler, "eval") == "xla"
        # One function per padded shape, each traced once: a single function traced for
        # every shape would be TensorFlow's "excessive retracing" warning, shape after shape.
        self._programs: dict[tuple[int, int], tf.types.experimental.GenericFunction] = {}

    def __call__(self, utterances: Sequence[xd.Utterance]) -> list[np.ndarray]:
        """Each utterance's frames, its mel's shape (`xtts_data.derive_mels`' `frames_of`)."""
        return [self.frames(u) for u in utterances]

    def frames(self, utterance: xd.Utterance) -> np.ndarray:
        """float32 [F, n_mels]: frame `t` predicted from the recorded frames before it."""
        frames, tokens = len(utterance.mel), len(utterance.tokens)
        f, t = padded_length(frames, floor=64), padded_length(tokens, floor=16)
        mel = np.zeros([1, f, utterance.mel.shape[1]], np.float32)
        mel[0, :frames] = utterance.mel
        ids = np.zeros([1, t], np.int32)
        ids[0, :tokens] = utterance.tokens
        start = max((frames - self.cond_frames) // 2, 0)  # the centre, as the pipeline's bank
        clip = utterance.mel[start : start + self.cond_frames]
        cond = np.zeros([1, self.cond_frames, mel.shape[2]], np.float32)
        cond[0, : len(clip)] = clip
        batch = {"tokens": ids, "token_mask": (np.arange(t) < tokens)[None].astype(np.float32),
                 "mel": mel, "mel_mask": (np.arange(f) < frames)[None].astype(np.float32),
                 "cond_mel": cond, "cond_lengths": np.array([len(clip)], np.int32)}  # fmt: skip
        if (t, f) not in self._programs:
            self._programs[t, f] = tf.function(self._frames, jit_compile=self._xla, autograph=False)
        out = self._programs[t, f]({k: tf.constant(v) for k, v in batch.items()})
        return out.numpy()[0, :frames]

    def _frames(self, batch):
        self.traces += 1  # Python: once per trace
        return self.model(batch, training=False, prenet_dropout=False)["mel_after"]
