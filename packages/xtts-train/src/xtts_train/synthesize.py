"""`synthesize`: text → mel with the trained model (compiled decoding) → waveform.

Decoding is the model's `infer`: a static `max_frames` buffer, sized from the text before
compiling (`text_buffer_frames`) unless given, the stop token, one XLA program, no
per-frame Python. The mel becomes audio through a trained vocoder run (`vocoder`), else
xtts-audio's Griffin-Lim; `save_mel` also writes it as `.npy` for an external vocoder.
With `stream`, the mel is decoded and vocoded a chunk at a time (`Streaming`,
`Waveforms.stream`) and the WAV grows as the audio arrives. A text longer than
`decode.split_symbols` symbols is spoken as pieces joined with pauses
(`inference.long_form`).
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from xtts_audio import WavWriter
from xtts_data.files import write_npy_atomic
from xtts_train.config import StackConfig
from xtts_train.errors import XttsTrainError
from xtts_train.inference.long_form import Spoken, piece_batch, speak_pieces, stream_pieces
from xtts_train.inference.vocoding import STREAM_NEEDS_VOCODER, Waveforms
from xtts_train.models.text_to_mel.decoding import (
    Decoding,
    Encoded,
    check_buffer_frames,
    text_buffer_frames,
    text_pieces,
)
from xtts_train.models.text_to_mel.streaming import CHUNK_FRAMES, Streaming
from xtts_train.runs.loading import load_reference, load_run, load_run_config

__all__ = ["Synthesis", "plot_decoding", "synthesize"]


@dataclasses.dataclass(frozen=True)
class Synthesis:
    """What `synthesize` wrote: the WAV, the mel picture (and `.npy`), how long the speech is."""

    wav: Path
    png: Path
    frames: int
    seconds: float
    stopped: bool  # the stop token ended it, every piece (not max_frames or the floor of
    # two frames per symbol)
    alignment: float  # `alignment_score` of the attention over its frames and text (the
    # pieces' scores weighted by their frames)
    mel: np.ndarray  # float32 [frames, n_mels]: what was turned into the WAV
    max_frames: int  # the decoding buffer (each piece's): given, or sized from the longest
    # piece's text (`text_buffer_frames`)
    text: str = ""  # what the text became (cleaned; IPA with phonemes)
    unknown: dict[str, int] = dataclasses.field(default_factory=dict)  # characters left out
    npy: Path | None = None  # `mel` as written by `save_mel`
    # Streamed: seconds from the start of decoding (programs compiled) to the first audio.
    first_audio: float | None = None
    # What the model read of each piece, in order: one piece unless the text was longer
    # than `decode.split_symbols` (`text_pieces`).
    pieces: tuple[str, ...] = ()


def synthesize(workdir: str | Path, text: str, out: str | Path, *,
               reference: str | Path | None = None, max_frames: int | None = None,
               griffin_lim_iters: int = 32,
               truth: np.ndarray | None = None, language: str | None = None,
               vocoder: str | Path | None = None, save_mel: bool = False,
               stream: bool = False, chunk_frames: int = CHUNK_FRAMES,
               overrides: Sequence[str] = (), progress: bool = False) -> Synthesis:  # fmt: skip
    """Speak `text` with the run's model; writes `out` (WAV), `out` with `.png` and, with
    `save_mel`, `out` with `.npy`.

    Args:
        workdir: the training run.
        text: what to say (normalised with the run's text settings).
        out: the WAV file to write.
        reference: a WAV/FLAC/OGG of the voice to condition on; default: the reference
            clip saved by `fit` (a crop of a training utterance).
        max_frames: the decoding buffer of each piece; speech longer than this is cut.
            None: sized from the longest piece's token count (`text_buffer_frames`: 0.5 s
            + 0.15 s per symbol at the run's frame rate, at most the run's
            `data.max_seconds`). At most `MAX_BUFFER_SECONDS` of speech.
        griffin_lim_iters: Griffin-Lim iterations.
        truth: float32 [frames, n_mels], a recording of `text` in the features' scale,
            drawn beside the synthesis in the picture.
        language: the text's language (BCP-47 tag); `None`: the run's `data.text.language`.
            A multilingual run speaks it with that language's token.
        vocoder: a vocoder run (`fit --task vocoder`) trained on this run's features,
            which turns the mel into audio; None: Griffin-Lim.
        save_mel: also write the decoded mel, exactly the frames turned into audio, to
            `out` with `.npy`: float32 [frames, n_mels] in the run's feature scale (the
            cache's: `xtts_audio.mel_features` of the run's `audio` settings).
        stream: decode and vocode `chunk_frames` frames at a time (`Streaming`,
            `Waveforms.stream`), writing the WAV as the audio arrives; needs `vocoder`.
            The mel is the unstreamed one up to float rounding, and the audio the
            vocoder's of it with `chunk_frames`-frame windows.
        chunk_frames: frames of each streamed chunk, in the decoder and the vocoder.
        overrides: `decode.KEY=VALUE` settings of the run's decoding (`--set`).
        progress: a progress bar while the pieces of a long text decode.

    A text longer than `decode.split_symbols` symbols is spoken as pieces
    (`text_pieces`), decoded side by side (streamed: in turn) and joined with their
    pauses (`inference.long_form`).

    Raises:
        XttsTrainError: not a run, no checkpoint, a language the run was not trained
            on, a text with none of the run's symbols, a vocoder of other audio
            settings (each named, both values), `stream` without a vocoder, or an
            override of a setting other than `decode.*`, a text of only punctuation,
            or a buffer past `MAX_BUFFER_SECONDS` of speech.
        ConfigError: an invalid override value, or `stream` with a model that cannot
            stream (`postfilters.check_streamable`).
    """
    if stream and vocoder is None:  # before anything loads
        raise XttsTrainError(STREAM_NEEDS_VOCODER)
    # First of all: a vocoder of other audio settings is refused before anything loads.
    waveforms = Waveforms(Path(workdir), load_run_config(Path(workdir), "text_to_mel"),
                          vocoder=vocoder, griffin_lim_iters=griffin_lim_iters,
                          chunk_frames=chunk_frames if stream else None)  # fmt: skip
    stack, model, tokenizer = load_run(workdir, overrides=overrides)
    pieces = text_pieces(text, stack.data.text, tokenizer, name="the text", language=language,
                         max_symbols=stack.decode.split_symbols)  # fmt: skip
    cond = load_reference(Path(workdir), stack, reference)  # (C, M)
    if max_frames is None:
        max_frames = max(text_buffer_frames(len(p.ids), stack) for p in pieces)
    check_buffer_frames(max_frames, stack)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if stream:
        streaming = Streaming(model, decode=stack.decode, cond_frames=stack.reference_frames,
                              max_frames=max_frames, chunk_frames=chunk_frames,
                              compiler=stack.train.compiler)  # fmt: skip
        spoken, first_audio = _speak_streamed(streaming, pieces, cond, waveforms, out, stack)
    else:
        decoding = Decoding(model, decode=stack.decode, cond_frames=stack.reference_frames,
                            max_frames=max_frames, batch_size=piece_batch(len(pieces)),
                            compiler=stack.train.compiler)  # fmt: skip
        spoken = speak_pieces(decoding, pieces, cond, stack.audio, progress=progress)
        _write_wav(out, [waveforms(spoken.features).numpy()], stack.audio.sample_rate)
        first_audio = None
    features = spoken.features
    png = out.with_suffix(".png")
    plot_decoding(png, text, features, spoken.attention, truth)
    npy = out.with_suffix(".npy") if save_mel else None
    if npy is not None:  # whole or not at all
        write_npy_atomic(npy, np.asarray(features, np.float32))
    seconds = len(features) * stack.audio.hop_length / stack.audio.sample_rate
    return Synthesis(out, png, len(features), seconds, spoken.stopped, spoken.alignment,
                     features, max_frames, " ".join(p.text for p in pieces),
                     _unknown(pieces), npy, first_audio,
                     tuple(p.text for p in pieces))  # fmt: skip


def _unknown(pieces: list[Encoded]) -> dict[str, int]:
    """The characters the pieces left out, counted over all of them."""
    return dict(sum((collections.Counter(p.unknown) for p in pieces), collections.Counter()))


def _speak_streamed(streaming: Streaming, pieces: list[Encoded], cond: np.ndarray,
                    waveforms: Waveforms, out: Path,
                    stack: StackConfig) -> tuple[Spoken, float | None]:  # fmt: skip
    """Decode and vocode a chunk at a time, piece after piece, the WAV `out` growing with
    each (programs compiled before the clock starts); also the seconds to the first
    audio."""
    spoken: list[Spoken] = []
    mel = stream_pieces(streaming, pieces, cond, stack.audio, spoken)
    waveforms.warm_up()
    first_audio = _write_wav(out, waveforms.stream(mel), stack.audio.sample_rate)
    return spoken[0], first_audio


def _write_wav(path: Path, chunks: Iterable[np.ndarray], sample_rate: int) -> float | None:
    """Writes audio chunks as a 16-bit mono WAV as they arrive: after each chunk `path` is
    a whole WAV of the samples so far (`xtts_audio.WavWriter`).

    Args:
        path: the WAV file.
        chunks: float32 [samples_i] each, in [-1, 1].
        sample_rate: samples per second.

    Returns:
        Seconds from the call until the first chunk arrived (None: no chunk).
    """
    started, first = time.perf_counter(), None
    with WavWriter(path, sample_rate) as wav:
        for chunk in chunks:
            first = time.perf_counter() - started if first is None else first
            wav.write(np.asarray(chunk, np.float32))
    return first


def plot_decoding(path: Path, title: str, mel: np.ndarray, attention: np.ndarray,
                  truth: np.ndarray | None = None) -> None:  # fmt: skip
    """The decoded mel (F, M) above the alignment head's attention (frames < F, T), frames
    shared; with `truth` (F', M), the ground truth's mel beside the decoded one."""
    figure = Figure(figsize=(12 if truth is not None else 8, 5))
    axes = figure.subplots(2, 2 if truth is not None else 1, squeeze=False)
    top, bottom = axes[0, 0], axes[1, 0]
    top.imshow(mel.T, origin="lower", aspect="auto", interpolation="nearest")
    top.set_ylabel("mel band")
    top.set_title(f"synthesised: {title[:60]}", fontsize=9)
    canvas = np.zeros([len(mel), attention.shape[1]], np.float32)
    canvas[: len(attention)] = attention[: len(mel)]
    bottom.imshow(canvas.T, origin="lower", aspect="auto", interpolation="nearest")
    bottom.set_xlim(top.get_xlim())
    bottom.set_xlabel("frame")
    bottom.set_ylabel("text symbol")
    if truth is not None:
        axes[0, 1].imshow(truth.T, origin="lower", aspect="auto", interpolation="nearest")
        axes[0, 1].set_title("ground truth", fontsize=9)
        axes[1, 1].axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
