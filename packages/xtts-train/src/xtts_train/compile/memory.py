"""Memory estimates of the compiled programs, checked before anything compiles.

A training step or a decoding whose buffers do not fit crashes deep in XLA (or glibc
aborts) after minutes of tracing and compiling. Each program's estimate is checked
against half of physical memory (the other half: TensorFlow, the XLA compiler's working
memory, the input pipeline) while its sizes are known and nothing has run, and a
program that would not fit is one error naming the setting to lower.

TensorFlow-free: the estimates are arithmetic on the config and the static shapes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from xtts_data.host import physical_memory
from xtts_train.config import RELATIVE_REACH
from xtts_train.errors import ConfigError

if TYPE_CHECKING:
    from xtts_data import BatchShape, DatasetSpec
    from xtts_train.config import ModelConfig

__all__ = [
    "check_decoding_memory",
    "check_training_memory",
    "decoding_bytes",
    "fixed_bytes",
    "parameter_count",
    "physical_memory",
    "row_bytes",
    "training_bytes",
]

_FLOAT = 4  # bytes: the estimates assume float32 (mixed precision halves the activations)
# Per parameter during the update: the weight, AdamW's two moments, the gradient, and the
# flat update's temporaries (flat gradient and weights, new moments, new weights).
_PARAMETER_COPIES = 9
# Per attention score kept for the backward pass: softmax, dropout mask, dropped scores,
# and the backward's gradient of the scores.
_SCORE_COPIES = 4
# Per position of a transformer block: d_model-wide values kept (residual stream, norm,
# q/k/v, attention output, projection, dropout masks) and ff-wide ones (before and after
# gelu, dropout mask and output).
_BLOCK_WIDE, _BLOCK_FF = 12, 4
# The program and XLA's runtime at a step's first call, whatever the shape: measured at the
# smallest shape below (521 MiB above the built model's RSS).
_RUNTIME_BYTES = 512 * 2**20


def decoding_bytes(config: ModelConfig, max_frames: int, batch_size: int = 1, *,
                   text_len: int = 0) -> int:  # fmt: skip
    """The largest memory terms of a compiled decoding, linear in the buffer: every decoder
    block's key/value cache (2 x d_model per step, steps = max_frames / r) and its keys and
    values of the memory (2 x d_model per token and speaker latent), the frame, stop and
    attention buffers and the postnet's channels per frame. The text adds the text
    encoder's heads x text_len² scores (logits and softmax; `text_len` 0: the text's share
    left out). 100,000 frames of the tiny model: 0.2 GiB (before the key/value cache, each
    step recomputed the whole buffer: 149 GiB estimated, 158 GiB when it was tried)."""
    steps = -(-max_frames // config.reduction_factor)
    frames = steps * config.reduction_factor
    memory = text_len + config.cond_latents
    blocks = 2 * config.decoder_layers * config.d_model * (steps + memory)
    buffers = frames * (config.n_mels + 1 + config.postnet_channels) + steps * memory
    text = 2 * config.heads * text_len * text_len
    return _FLOAT * batch_size * (blocks + buffers + text)


def check_decoding_memory(config: ModelConfig, max_frames: int, batch_size: int = 1, *,
                          text_len: int = 0, text_name: str = "text_len") -> None:  # fmt: skip
    """Refuse a decoding that would not fit in half of physical memory (`decoding_bytes`).

    Args:
        text_len: static token length of the decoded rows (0: not checked); `text_name`
            names the setting that sets it in the message.

    Raises:
        ConfigError: with the estimate, the machine's memory and the largest buffer (or
            text) that fits.
    """
    memory = physical_memory()
    needed = decoding_bytes(config, max_frames, batch_size, text_len=text_len)
    if needed <= memory // 2:
        return
    if decoding_bytes(config, max_frames, batch_size) <= memory // 2:  # the text is too long
        limit = _largest(lambda t: decoding_bytes(config, max_frames, batch_size, text_len=t)
                         <= memory // 2)  # fmt: skip
        raise ConfigError(
            f"Expected {text_name} <= {limit} tokens on this machine, received: "
            f"{text_name}={text_len} (decoding would need about {needed / 2**30:,.0f} GiB, "
            f"more than half of the {memory / 2**30:.0f} GiB here); decode a shorter text"
        )
    limit = _largest(lambda f: decoding_bytes(config, f, batch_size) <= memory // 2)
    raise ConfigError(
        f"Expected max_frames <= {limit} on this machine, received: max_frames="
        f"{max_frames} (decoding would need about {needed / 2**30:,.0f} GiB for its "
        f"buffers and key/value caches, more than half of the {memory / 2**30:.0f} GiB here)"
    )


def _largest(fits: Callable[[int], bool]) -> int:
    """The largest n >= 0 with `fits(n)`, for `fits` true at 0 and monotone."""
    high = 1
    while fits(high):
        high *= 2
    low = high // 2  # fits(low), not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def training_bytes(config: ModelConfig, batch: int, text: int, frames: int, *,
                   cond_frames: int) -> int:  # fmt: skip
    """Estimated peak memory of one training step (forward, backward, AdamW update) at one
    static batch shape, in float32.

    `_RUNTIME_BYTES` plus the parameters `_PARAMETER_COPIES` times, and per row the
    activations kept for the backward pass: per transformer block `_SCORE_COPIES` x heads
    x queries x keys attention scores (text encoder over `text` tokens, conditioning
    encoder over `cond_frames`, decoder over steps = frames / r with cross-attention to
    text + latents) and `_BLOCK_WIDE` x d_model + `_BLOCK_FF` x ff_mult x d_model values
    per position; the convs, prenet, postnet and losses add a few values of their width
    per position. `train.grad_accum` is not counted: it does not lower the peak (below).

    Measured: the peak RSS of one step in a fresh process, its program loaded from the
    compile cache, minus the RSS after building the model and AdamW (tiny preset, 128
    conditioning frames, float32, XLA on a 2-core CPU, TF 2.21); (batch, text, frames):
    estimate / measured: (1, 8, 16) 564 / 521 MiB, (8, 64, 256) 719 / 688 MiB,
    (4, 64, 1024) 1,014 / 1,016 MiB, (4, 64, 2048) 1,962 / 1,797 MiB: above the smallest
    shape, +155 / +167, +450 / +495 and +1,398 / +1,276 MiB. With `grad_accum=4`, the
    (4, 64, 1024) step measured 1,924 MiB: the unrolled micro-batches add to the peak.

    Args:
        config: the model sizes.
        batch, text, frames: the static shape: rows, padded tokens, padded mel frames.
        cond_frames: frames of the conditioning mel (`DatasetSpec.cond_frames`).

    Returns:
        Bytes.
    """
    for name, value in (("batch", batch), ("text", text), ("frames", frames),
                        ("cond_frames", cond_frames)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"Expected {name} an int >= 1, received: {name}={value!r}")
    return fixed_bytes(config) + batch * row_bytes(config, text, frames, cond_frames)


def check_training_memory(config: ModelConfig, spec: DatasetSpec) -> None:
    """Refuse batch shapes whose training step would not fit in half of physical memory.

    Raises:
        ConfigError: naming the largest shape, its estimate, the machine's memory, the
            largest batch of that shape that fits, and the settings to lower.
    """
    memory = physical_memory()

    def needed(shape: BatchShape) -> int:
        return training_bytes(config, shape.batch_size, shape.text_len, shape.frames,
                              cond_frames=spec.cond_frames)  # fmt: skip

    largest = max(spec.shapes, key=needed)
    if needed(largest) <= memory // 2:
        return
    b, t, f = largest.batch_size, largest.text_len, largest.frames
    fixed = fixed_bytes(config)
    fits = max((memory // 2 - fixed) // _FLOAT // _row_floats(config, t, f, spec.cond_frames), 0)
    expected = (
        f"a batch of at most {fits} rows of {t} tokens x {f} frames"
        if fits
        else f"a batch shape whose rows fit (not one row of {t} tokens x {f} frames does)"
    )
    raise ConfigError(
        f"Expected {expected} on this machine, received: batch shape (batch, text, "
        f"frames)=({b}, {t}, {f}) (one training step would need about "
        f"{needed(largest) / 2**30:,.1f} GiB, more than half of the {memory / 2**30:.0f} GiB "
        f"here); {_what_to_lower(fits, fixed > memory // 2)}"
    )


def _what_to_lower(fits: int, model_too_large: bool) -> str:
    """The settings to lower: the model's, a row's (none fits) or the batch's."""
    if model_too_large:
        return "lower the model's sizes (model.d_model, model.ff_mult, the model's layers)"
    if not fits:  # one row alone does not fit
        return (
            "lower data.max_frames, data.max_text_len or data.cond_frames (one row alone does "
            "not fit), or the model's sizes"
        )
    return (
        "lower data.batch_size or data.frame_budget (a bucket's batch is frame_budget // its "
        "frames; the budget defaults to batch_size x max_frames), or data.max_frames"
    )


def row_bytes(config: ModelConfig, text: int, frames: int, cond_frames: int) -> int:
    """What one row of a (text, frames) shape adds to a training step (`training_bytes`)."""
    return _FLOAT * _row_floats(config, text, frames, cond_frames)


def fixed_bytes(config: ModelConfig) -> int:
    """What a training step holds whatever its shape: the runtime, the parameters' copies."""
    return _RUNTIME_BYTES + _FLOAT * _PARAMETER_COPIES * _parameters(config)


def parameter_count(config: ModelConfig) -> int:
    """Trainable parameters of `TextToMel(config)`, from the sizes alone (nothing built)."""
    return _parameters(config)


def _parameters(config: ModelConfig) -> int:
    """Trainable parameters of `TextToMel(config)`, counted from the sizes
    (`TextToMel.parameter_count` counts the built model's weights)."""
    d, ff, k, m = config.d_model, config.ff_mult * config.d_model, config.conv_kernel, config.n_mels
    block = 4 * d * d + 2 * d * ff + 9 * d + ff  # attention, feed-forward, two norms
    cross = 4 * d * d + 6 * d  # cross-attention and its norm
    text = config.vocab_size * d + config.text_convs * (k * d * d + 3 * d) + 2 * d
    cond = (m * k * d + d) + (config.cond_convs - 1) * (k * d * d + d)
    cond += config.cond_latents * d + 4 * d * d + 8 * d  # latents, pooling attention, norms
    p, r = config.prenet_dim, config.reduction_factor
    decoder = m * p + p * p + 2 * p + p * d + 3 * d
    decoder += 3 * d * config.voice_pitch  # the pitch's projection: (mean, deviation) → D
    heads = (d + 1) * r * (m + 1)
    c, kp, layers = config.postnet_channels, config.postnet_kernel, config.postnet_layers
    widths = [m] + [c] * (layers - 1) + [m]  # postnet: channels in and out of each conv
    postnet = sum(kp * a * b + b for a, b in itertools.pairwise(widths))
    if config.alignment == "relative":  # `location.Aligner`
        w, span = d // config.heads, 2 * RELATIVE_REACH + 1
        decoder += 2 * d + (2 * d * w + w) + d + 1  # norm, query and key, the move's rate
        decoder += span + max(config.decoder_layers - 1, 1) * config.heads * span  # tables
        decoder += (RELATIVE_REACH + 1) * d  # the symbols-left vectors
    blocks = (config.text_layers + config.cond_layers + config.decoder_layers) * block
    return text + cond + decoder + heads + postnet + blocks + config.decoder_layers * cross


def _row_floats(config: ModelConfig, text: int, frames: int, cond_frames: int) -> int:
    """Activations one row of a (text, frames) shape keeps for the backward pass."""
    d, h = config.d_model, config.heads
    steps = -(-frames // config.reduction_factor)
    memory = text + config.cond_latents  # the decoder's cross-attention keys
    per_position = _BLOCK_WIDE * d + _BLOCK_FF * config.ff_mult * d

    def attention(queries: int, keys: int) -> int:
        return _SCORE_COPIES * h * queries * keys

    def self_attention(length: int) -> int:
        """Kept per layer: the dense scores, or in blocks (`model.attention_block`) none:
        one block's are recomputed at a time (`blocked`, counted once below)."""
        return 0 if _blocked(config, length) else attention(length, length)

    blocked = max((attention(config.attention_block, n) for n in (text, cond_frames, steps)
                   if _blocked(config, n)), default=0)  # fmt: skip
    blocks = (
        config.text_layers * (self_attention(text) + text * per_position)
        + config.cond_layers * (self_attention(cond_frames) + cond_frames * per_position)
        + config.decoder_layers * (self_attention(steps) + attention(steps, memory)
                                   + steps * (per_position + 6 * d) + 2 * memory * d)
        + blocked
    )  # fmt: skip
    convs = 6 * d * (config.text_convs * text + config.cond_convs * cond_frames)
    pooling = attention(config.cond_latents, cond_frames)
    prenet = 8 * config.prenet_dim * steps
    postnet = 5 * config.postnet_channels * (config.postnet_layers - 1) * frames
    losses = 12 * config.n_mels * frames + 8 * frames * text  # mels; guided attention (F, T)
    return blocks + convs + pooling + prenet + postnet + losses


def _blocked(config: ModelConfig, length: int) -> bool:
    """Whether a self-attention over `length` positions runs in query blocks."""
    return 0 < config.attention_block < length
