"""The building blocks of `Vocoder`: a ConvNeXt block and the backbone that stacks them.

As in Vocos (Siuzdenko 2023, `vocos/modules.py` and `vocos/models.py`): every layer runs at
the frame rate, and the only context across frames comes from the convolutions (the norms
and dense layers act on each frame alone), which is what bounds `receptive_frames`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras
import tensorflow as tf

from xtts_audio.spectral import in_xla
from xtts_train.models.text_to_mel.layers import LazyLayer

if TYPE_CHECKING:
    from xtts_train.config import VocoderConfig

__all__ = ["EMBED_KERNEL", "Backbone", "ConvNeXtBlock", "DepthwiseConv"]

# Vocos's LayerNorm epsilon.
_EPSILON = 1e-6
# The embedding convolution's kernel (Vocos's): 3 frames of context each side.
EMBED_KERNEL = 7


def _init() -> keras.initializers.Initializer:
    """Vocos's initialisation of the backbone's convolutions and dense layers."""
    return keras.initializers.TruncatedNormal(stddev=0.02)


class DepthwiseConv(keras.layers.DepthwiseConv1D):
    """Keras's `DepthwiseConv1D` with "same" padding, computed under XLA as `kernel` shifted
    multiply-adds: XLA's CPU grouped convolution measured 15-30x slower than that (forward
    and gradient, kernel 7, 256 channels), while without XLA TensorFlow's own kernel is the
    faster one. The same weights and results either way.
    """

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        """inputs: (B, F, D) → (B, F, D * depth_multiplier)."""
        plain = self.strides == (1,) and self.dilation_rate == (1,) and self.padding == "same"
        if not (in_xla() and plain and self.depth_multiplier == 1):
            return super().call(inputs)
        taps, frames = self.kernel.shape[0], inputs.shape[1]
        kernel = tf.cast(self.kernel[:, :, 0], inputs.dtype)  # (k, D)
        left = (taps - 1) // 2  # "same" pads (k - 1) // 2 before, the rest after
        padded = tf.pad(inputs, [[0, 0], [left, taps - 1 - left], [0, 0]])
        out = tf.add_n([padded[:, j : j + frames] * kernel[j] for j in range(taps)])
        if self.use_bias:
            out = out + tf.cast(self.bias, out.dtype)
        return self.activation(out) if self.activation is not None else out


class ConvNeXtBlock(keras.layers.Layer):
    """ConvNeXt block over frames: depthwise conv, norm, pointwise MLP, layer scale, residual.

    Args:
        dim: channels in and out.
        intermediate: width of the pointwise expansion.
        kernel: the depthwise convolution's kernel (odd, "same" padding).
        scale_init: initial value of the per-channel layer scale `gamma` (Vocos: 1 / layers).
    """

    def __init__(self, *, dim: int, intermediate: int, kernel: int, scale_init: float,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.dim, self.scale_init = dim, scale_init
        self.depthwise = DepthwiseConv(
            kernel, padding="same", depthwise_initializer=_init(), name="depthwise"
        )
        self.norm = keras.layers.LayerNormalization(epsilon=_EPSILON, name="norm")
        self.expand = keras.layers.Dense(
            intermediate, activation="gelu", kernel_initializer=_init(), name="expand"
        )
        self.project = keras.layers.Dense(dim, kernel_initializer=_init(), name="project")

    def build(self, input_shape: Any) -> None:
        """Creates `gamma` (dim,); the sublayers create their weights on the first call."""
        self.gamma = self.add_weight(
            shape=(self.dim,), initializer=keras.initializers.Constant(self.scale_init),
            name="gamma",
        )  # fmt: skip
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """x: (B, F, D) → (B, F, D)."""
        h = self.depthwise(x)  # (B, F, D): the block's only context across frames
        h = self.project(self.expand(self.norm(h)))  # (B, F, D)
        return x + tf.cast(self.gamma, h.dtype) * h


class Backbone(LazyLayer):
    """Standardised mel → hidden frames: embedding conv + norm, ConvNeXt blocks, final norm.

    Args:
        config: the vocoder sizes (`dim`, `intermediate`, `layers`, `kernel`).
    """

    def __init__(self, config: VocoderConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.embed = keras.layers.Conv1D(
            config.dim, EMBED_KERNEL, padding="same", kernel_initializer=_init(), name="embed"
        )
        self.embed_norm = keras.layers.LayerNormalization(epsilon=_EPSILON, name="embed_norm")
        sizes = dict(dim=config.dim, intermediate=config.intermediate, kernel=config.kernel)
        self.blocks = [
            ConvNeXtBlock(**sizes, scale_init=1.0 / config.layers, name=f"block_{i}")
            for i in range(config.layers)
        ]
        self.norm = keras.layers.LayerNormalization(epsilon=_EPSILON, name="norm")

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """x: standardised mel (B, F, M) → hidden (B, F, D) in the compute dtype."""
        x = self.embed_norm(self.embed(x))  # (B, F, D)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)
