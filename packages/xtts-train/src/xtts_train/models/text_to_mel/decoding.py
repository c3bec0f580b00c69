"""Free-running decoding of token rows with the model's compiled `infer`.

One `Decoding` serves `synthesize`, `evaluate` and the trainer's eval sentences: rows are
padded to a multiple of `TEXT_BUCKET` tokens and to `batch_size` rows (masked, as in
training), so texts of similar length share one program (and, compiled by XLA, its
compile-cache entry).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

import xtts_audio as xa
from xtts_data import TextConfig, Tokenizer, XttsDataError, pieces
from xtts_data.pieces import Encoded, row_pieces
from xtts_train.compile import compile_cache
from xtts_train.compile.compiler import resolve
from xtts_train.compile.memory import check_decoding_memory
from xtts_train.config import DecodeConfig, StackConfig
from xtts_train.errors import XttsTrainError
from xtts_train.models.text_to_mel.alignment import alignment_score
from xtts_train.models.text_to_mel.model import TextToMel
from xtts_train.models.text_to_mel.postfilters import decode_frames

__all__ = [
    "MAX_BUFFER_SECONDS",
    "TEXT_BUCKET",
    "Decoded",
    "Decoding",
    "Encoded",
    "Ending",
    "buffer_frames",
    "check_buffer_frames",
    "decoding_inputs",
    "ending",
    "row_pieces",
    "text_buffer_frames",
    "text_ids",
    "text_pieces",
]

# Token ids are padded to a multiple of this, so texts of similar length share a program.
TEXT_BUCKET = 32
FRAME_BUCKET = 32  # decoding buffers are a multiple of this


# A text-sized buffer holds SECONDS_BASE + SECONDS_PER_SYMBOL x symbols of speech: every
# utterance of the corpora measured (`text_buffer_frames`) fits with room to spare.
SECONDS_PER_SYMBOL = 0.15
SECONDS_BASE = 0.5
# The longest buffer one decoding may be given: a minute of speech. Text that long is
# decoded as pieces (`text_pieces`), each in a buffer sized from its own symbols.
MAX_BUFFER_SECONDS = 60.0


def buffer_frames(longest: int) -> int:
    """A decoding buffer with room for twice `longest` frames, rounded up to 32."""
    return -(-2 * longest // FRAME_BUCKET) * FRAME_BUCKET


def text_buffer_frames(symbols: int, stack: StackConfig) -> int:
    """A decoding buffer for a text of `symbols` token ids, sized before decoding.

    Room for `SECONDS_BASE` (0.5 s) + `SECONDS_PER_SYMBOL` (0.15 s) per symbol of speech at
    the run's frame rate (`audio.sample_rate / audio.hop_length`, frames counted by
    `xtts_audio.num_frames`), at most the longest utterance the run's cache kept
    (`data.max_frames`, else `data.max_seconds`; neither: no cap), rounded up to a multiple
    of `data.pad_multiple` and of the reduction factor. At 22050 Hz / hop 256: 12.9
    frames per symbol and 43 more, 1,728 frames at most (`max_seconds` 20).

    The bound, measured as frames / tokens (`<eos>` included) over caches of the default
    audio settings: espeak-ng English (600 utterances of 14-74 symbols, letters or
    phonemes) at most 7.8 frames per symbol (0.090 s), median 5.2-5.4; the demo corpus's
    synthesiser (200 utterances of 1-10 s, 1 and 4 speakers) at most 9.5 (0.110 s),
    median 7.3-7.5, trimmed at 40 dB, and 10.3 untrimmed (its padding silence kept); its
    0.4-1.0 s utterances of 4-10 symbols (the tests' corpus) 7.5 trimmed and 16.8 (0.19 s)
    untrimmed, where silence weighs more, which `SECONDS_BASE` covers. Every utterance
    fits: the buffer is at least 1.35 times its frames (0.34 s or more to spare), and
    the median one fills 32-59% of it. A text spoken slower is cut at the buffer, and its
    decoding is reported as ended by the length limit.

    Args:
        symbols: token ids of the text (`<eos>` and a language token included).
        stack: the run's config (`audio`, `data`, `model.reduction_factor`).

    Returns:
        Frames of the buffer, >= 1.
    """
    audio, data = stack.audio, stack.data
    wanted = _speech_frames(SECONDS_BASE + SECONDS_PER_SYMBOL * symbols, audio)
    if data.max_frames is not None:
        wanted = min(wanted, data.max_frames)
    elif data.max_seconds is not None:
        wanted = min(wanted, _speech_frames(data.max_seconds, audio))
    multiple = math.lcm(data.pad_multiple, stack.model.reduction_factor)
    return max(1, -(-wanted // multiple)) * multiple


def check_buffer_frames(max_frames: int, stack: StackConfig) -> None:
    """Refuse a decoding buffer past `MAX_BUFFER_SECONDS` of speech at the run's frame rate
    (a model left to run to its buffer's end would decode it for minutes).

    Raises:
        XttsTrainError: naming the bound in frames and seconds.
    """
    bound = _speech_frames(MAX_BUFFER_SECONDS, stack.audio)
    if max_frames > bound:
        rate = stack.audio.sample_rate / stack.audio.hop_length
        raise XttsTrainError(
            f"Expected max_frames <= {bound} ({MAX_BUFFER_SECONDS:.0f} s of speech at "
            f"{rate:.1f} frames/s), received: max_frames={max_frames} "
            f"({max_frames / rate:.0f} s); a longer text is spoken as pieces of at most "
            f"decode.split_symbols symbols, each with a buffer sized from its text"
        )


def _speech_frames(seconds: float, audio: xa.MelConfig) -> int:
    """Mel frames of `seconds` of audio."""
    return int(xa.num_frames(math.ceil(seconds * audio.sample_rate), audio))


def text_ids(text: str, config: TextConfig, tokenizer: Tokenizer, *, name: str,
             language: str | None = None) -> Encoded:  # fmt: skip
    """`xtts_data.pieces.text_ids`, its errors as XttsTrainError."""
    (encoded,) = text_pieces(text, config, tokenizer, name=name, language=language)
    return encoded


def text_pieces(text: str, config: TextConfig, tokenizer: Tokenizer, *, name: str,
                language: str | None = None, max_symbols: int = 0) -> list[Encoded]:  # fmt: skip
    """`xtts_data.pieces.text_pieces` (a text normalised, cut into pieces of at most
    `max_symbols` symbols and encoded), its errors as XttsTrainError.

    Raises:
        XttsTrainError: no symbol of `tokenizer` is left after normalisation (in the text
            or a piece), only punctuation is, or the run has no such language; `name`
            says where the text came from.
    """
    try:
        return pieces.text_pieces(text, config, tokenizer, name=name, language=language,
                                  max_symbols=max_symbols)  # fmt: skip
    except XttsDataError as error:
        raise XttsTrainError(str(error)) from None


@dataclasses.dataclass(frozen=True)
class Ending:
    """How one row's decoding ended.

    Attributes:
        length: decoded frames: the stop token's frame + 1, or `max_frames`.
        stopped: the stop token fired inside the buffer.
        attention: float32 [length, T] the alignment head over the row's real tokens.
        alignment: `alignment_score` of `attention`.
    """

    length: int
    stopped: bool
    attention: np.ndarray
    alignment: float


def check_sizes(**sizes: object) -> None:
    """Raises XttsTrainError for a size (a buffer's frames, rows, a chunk) that is not an
    int >= 1, naming it; the decodings' one check of their sizes."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise XttsTrainError(f"Expected {name} an int >= 1, received: {name}={value!r}")


def ending(result: Mapping[str, np.ndarray], i: int, symbols: int) -> Ending:
    """Row `i` of a decoding's `lengths` int32 [B], `stop_probs` float32 [B, F] and
    `attention` float32 [B, F, T] (`free_running.infer`'s), its text `symbols` tokens long."""
    length = int(result["lengths"][i])
    attention = result["attention"][i, :length, :symbols]  # (F, T) real frames and tokens
    score = alignment_score(attention[None], tf.ones([1, symbols]), tf.ones([1, length]))
    stopped = bool(result["stop_probs"][i, length - 1] > 0.5)
    return Ending(length, stopped, attention, float(score[0]))


@dataclasses.dataclass(frozen=True)
class Decoded:
    """One decoded row.

    Attributes:
        mel: float32 [length, n_mels] after the postnet, in the features' scale.
        attention: float32 [length, T] the alignment head over the row's real tokens.
        length: decoded frames: the stop token's frame + 1, or `max_frames`.
        stopped: the stop token fired inside the buffer.
        alignment: `alignment_score` of `attention`.
        buffer: float32 [max_frames, n_mels], the whole decoding buffer (frames from
            `length` on were generated after the stop, or are zeros).
    """

    mel: np.ndarray
    attention: np.ndarray
    length: int
    stopped: bool
    alignment: float
    buffer: np.ndarray


class Decoding:
    """The decoding of `decode` (`postfilters.decode_frames`: `free_running.infer` and the
    postfilters) compiled for `batch_size` rows, a reference of `cond_frames` frames and a
    `max_frames` buffer; one program per text bucket.

    Args:
        model: the trained model.
        decode: how it decodes (a run's `decode` section).
        cond_frames: frames of the reference mel the model conditions on.
        max_frames: the decoding buffer; speech longer than this is cut.
        batch_size: rows decoded together (fewer are padded with copies of the first).
        compiler: `auto`, `xla` or `graph`: who runs the decoding loop
            (`xtts_train.compile.compiler`; a run's `train.compiler`).
        check_memory: refuse a buffer this machine's memory cannot hold
            (`check_decoding_memory`); off for a program built here to run on another
            machine (`xtts-bench hlo export`).

    Attributes:
        compiler: `"xla"` or `"graph"`, as `compiler` resolved for this device.
    """

    def __init__(self, model: TextToMel, *, decode: DecodeConfig, cond_frames: int,
                 max_frames: int, batch_size: int = 1,
                 compiler: str = "auto", check_memory: bool = True) -> None:  # fmt: skip
        check_sizes(max_frames=max_frames, batch_size=batch_size, cond_frames=cond_frames)
        if check_memory:
            check_decoding_memory(model.config, max_frames, batch_size)
        self.model, self.decode, self.cond_frames = model, decode, cond_frames
        self.check_memory = check_memory
        self.max_frames, self.batch_size = max_frames, batch_size
        self.compiler = resolve(compiler, "decode")
        self._infer = tf.function(
            lambda t, m, c, n: decode_frames(model, decode, t, m, c, n, max_frames=max_frames),
            jit_compile=self.compiler == "xla",
            autograph=False,
        )
        self._programs: dict[int, tf.types.experimental.ConcreteFunction] = {}

    @property
    def function(self) -> tf.types.experimental.PolymorphicFunction:
        """The `tf.function` of the decoding, `(tokens, token_mask, cond_mel, cond_lengths)`
        (`decoding_inputs`): what an exporter of the compiled programs reads."""
        return self._infer

    @property
    def programs(self) -> int:
        """Programs traced so far (one per text bucket used)."""
        return self._infer.experimental_get_tracing_count()

    def __call__(self, rows: Sequence[Sequence[int]],
                 reference: np.ndarray | Sequence[np.ndarray], *,
                 done: Callable[[int], object] | None = None) -> list[Decoded]:  # fmt: skip
        """Decode token rows, `batch_size` at a time, conditioned on `reference`.

        Args:
            rows: token ids of each text (ending with `<eos>`), at least one row.
            reference: float32 [frames, n_mels] mel of the voice (cut to `cond_frames`), or
                a list of them, one per row (each row in its own voice).
            done: called with the rows of each batch once it is decoded (a progress bar's
                `update`).

        Returns:
            One `Decoded` per row, in order.
        """
        if not rows:
            raise XttsTrainError("Expected at least one row of token ids, received none")
        references = reference if isinstance(reference, list | tuple) else [reference] * len(rows)
        if len(references) != len(rows):
            raise XttsTrainError(f"Expected one reference per row ({len(rows)}), received: "
                                 f"{len(references)} references")  # fmt: skip
        decoded = []
        for start in range(0, len(rows), self.batch_size):
            stop = start + self.batch_size
            decoded += self._decode(rows[start:stop], references[start:stop])
            if done is not None:
                done(len(rows[start:stop]))
        return decoded

    def _decode(self, rows: Sequence[Sequence[int]],
                references: Sequence[np.ndarray]) -> list[Decoded]:  # fmt: skip
        """1 .. batch_size rows, each with its reference, through the program of their
        text bucket."""
        inputs = decoding_inputs(rows, references, batch_size=self.batch_size,
                                 cond_frames=self.cond_frames)  # fmt: skip
        text = inputs[0].shape[1]
        if text not in self._programs:
            if self.check_memory:
                check_decoding_memory(self.model.config, self.max_frames, self.batch_size,
                                      text_len=text)  # fmt: skip
            name = f"decode {self.batch_size}x{text}x{self.cond_frames}x{self.max_frames}"
            with compile_cache.collect(), compile_cache.stable_names(name):
                self._programs[text] = self._infer.get_concrete_function(*inputs)
        with compile_cache.collect():
            result = {k: v.numpy() for k, v in self._programs[text](*inputs).items()}
        return [self._row(result, i, len(ids)) for i, ids in enumerate(rows)]

    def _row(self, result: dict[str, np.ndarray], i: int, symbols: int) -> Decoded:
        end = ending(result, i, symbols)
        return Decoded(
            mel=result["mel"][i, : end.length], attention=end.attention, length=end.length,
            stopped=end.stopped, alignment=end.alignment, buffer=result["mel"][i],
        )  # fmt: skip


def decoding_inputs(rows: Sequence[Sequence[int]], references: Sequence[np.ndarray], *,
                    batch_size: int, cond_frames: int) -> list[tf.Tensor]:  # fmt: skip
    """`free_running.infer`'s inputs for 1 .. `batch_size` rows, padded to a multiple of
    `TEXT_BUCKET` tokens and to `batch_size` rows (copies of the first).

    Args:
        rows: token ids of each text.
        references: float32 [frames, n_mels] of each row, cut or zero-padded to
            `cond_frames`.

    Returns:
        tokens int32 [B, T], token_mask float32 [B, T], cond_mel float32 [B, C, M],
        cond_lengths int32 [B].
    """
    longest = max(len(ids) for ids in rows)
    text = -(-longest // TEXT_BUCKET) * TEXT_BUCKET
    tokens = np.zeros([batch_size, text], np.int32)
    for i, ids in enumerate([*rows, *[rows[0]] * (batch_size - len(rows))]):
        tokens[i, : len(ids)] = ids
    references = [*references, *[references[0]] * (batch_size - len(references))]
    cond = np.zeros([batch_size, cond_frames, references[0].shape[-1]], np.float32)
    used = np.array([min(len(r), cond_frames) for r in references], np.int32)
    for i, r in enumerate(references):
        cond[i, : used[i]] = r[: used[i]]
    return [
        tf.constant(tokens),
        tf.constant((tokens != 0).astype(np.float32)),
        tf.constant(cond),
        tf.constant(used),
    ]
