"""Mel features of many clips of any lengths in a few calls of one compiled function.

Clips are laid end to end on the hop grid of one long signal (each with its own centre
padding), so every frame of every clip is a frame of that signal; the signal is cut into
fixed-size overlapping blocks and run through one XLA-compiled batched `mel_spectrogram`.
One compile per recipe, no padding to the longest clip, and each clip's frames equal what
`mel_features` computes on the clip alone.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import tensorflow as tf

from xtts_audio import MelConfig, mel_spectrogram, normalize, num_frames

__all__ = ["MelExtractor"]


class MelExtractor:
    """Computes `mel_features(clip, config)` for lists of clips, batched.

    Thread-safe: several threads may call one extractor (each call runs on its own core).

    Args:
        config: the recipe.
        block_frames: frames per block (one row of the compiled batch).
        blocks: rows per compiled call.
    """

    def __init__(self, config: MelConfig, *, block_frames: int = 256, blocks: int = 32):
        self.config = config
        self._blocks = blocks
        self._block_frames = block_frames
        self._block_samples = (block_frames - 1) * config.hop_length + config.n_fft
        self._center_pad = config.n_fft // 2 if config.center else 0
        self._flat = flat = dataclasses.replace(config, center=False)  # centred per clip
        spec = tf.TensorSpec([blocks, self._block_samples], tf.float32)
        self._mel = tf.function(
            lambda x: mel_spectrogram(x, flat),
            input_signature=[spec],
            jit_compile=True,
            autograph=False,
        )  # (blocks, block_samples) -> (blocks, block_frames, n_mels)
        self._normalize = tf.function(
            lambda mel: normalize(mel, config),
            input_signature=[tf.TensorSpec([None, config.n_mels], tf.float32)],
            autograph=False,
        )

    def __call__(self, clips: list[np.ndarray]) -> list[np.ndarray]:
        """Features of each clip.

        Args:
            clips: float32 [samples] arrays at `config.sample_rate`, each long enough for
                one frame (see `_audio_io.min_samples`).

        Returns:
            float32 [num_frames(samples), n_mels] per clip, in order.
        """
        if not clips:
            return []
        signal, starts, counts = self._lay_out(clips)
        mel = self._linear_mel(signal)  # (total_frames, n_mels)
        if self.config.top_db is None:  # elementwise scaling: one call for every clip
            mel = self._normalize(mel).numpy()
            return [mel[start : start + count] for start, count in zip(starts, counts, strict=True)]
        return [  # top_db clamps relative to each clip's own peak
            self._normalize(mel[start : start + count]).numpy()
            for start, count in zip(starts, counts, strict=True)
        ]

    def _lay_out(self, clips: list[np.ndarray]) -> tuple[np.ndarray, list[int], list[int]]:
        """One signal holding every (centre-padded) clip, each starting at a frame boundary."""
        hop, pad = self.config.hop_length, self._center_pad
        counts = [num_frames(len(clip), self.config) for clip in clips]
        starts = np.cumsum([0] + [math.ceil((len(c) + 2 * pad) / hop) for c in clips]).tolist()
        signal = np.zeros(starts[-1] * hop + self.config.n_fft, np.float32)
        for start, clip in zip(starts, clips, strict=False):
            begin = start * hop + pad
            signal[begin : begin + len(clip)] = clip
            if pad and self.config.pad_mode == "reflect":  # as np.pad(mode="reflect")
                signal[begin - pad : begin] = clip[pad:0:-1]
                signal[begin + len(clip) : begin + len(clip) + pad] = clip[-2 : -pad - 2 : -1]
        return signal, starts[:-1], counts

    def _linear_mel(self, signal: np.ndarray) -> np.ndarray:
        hop, rows = self.config.hop_length, self._blocks
        frames = num_frames(len(signal), self._flat)  # the signal is centred already
        calls = math.ceil(frames / (self._block_frames * rows))
        stride = self._block_frames * hop
        total = (calls * rows - 1) * stride + self._block_samples
        signal = np.pad(signal, (0, max(total - len(signal), 0)))
        view = np.lib.stride_tricks.sliding_window_view(signal, self._block_samples)[::stride]
        out = [self._mel(view[c * rows : (c + 1) * rows]).numpy() for c in range(calls)]
        return np.concatenate(out).reshape(-1, self.config.n_mels)  # (frames, n_mels)
