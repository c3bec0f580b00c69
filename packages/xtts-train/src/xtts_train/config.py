"""`ModelConfig`, `TrainConfig` and the stack YAML config with `--set section.key=value`.

TensorFlow-free: the command line reads and checks a config before TensorFlow loads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from xtts_audio import MelConfig
from xtts_audio.frozen_config import FrozenConfig
from xtts_data import DataConfig
from xtts_data.config import load_config, read_stack
from xtts_data.manifest import Manifest
from xtts_train.errors import ConfigError

__all__ = [
    "COMPILERS",
    "DECODE_PRESETS",
    "MEL_MEAN",
    "MEL_STD",
    "PRESETS",
    "STRATEGIES",
    "VOCODER_PRESETS",
    "DecodeConfig",
    "ModelConfig",
    "StackConfig",
    "TextToMelConfig",
    "TrainConfig",
    "VocoderConfig",
    "as_written",
    "load_stack_config",
    "refuse_moved_settings",
]

# `--strategy`: see `xtts_train.training.distribute`.
STRATEGIES = ("auto", "one-device", "mirrored", "multi-worker")

# `train.compiler`: see `xtts_train.compile.compiler`.
COMPILERS = ("auto", "xla", "graph")

Precision = Literal["float32", "mixed_float16", "mixed_bfloat16"]
_PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


# The fixed standardisation of the features both networks read, `(mel - MEL_MEAN) /
# MEL_STD` in and its inverse out (`xtts_train.models.features`): it fits `ln` mels of the
# `xtts` audio preset (speech around -5, the floor ln 1e-5 = -11.5 at -2.6).
MEL_MEAN = -5.0
MEL_STD = 2.5

VOICE_STATS = ("off", "mean_std")  # ModelConfig.voice_stats
VOICE_STATS_SOURCES = ("clip", "utterance")  # ModelConfig.voice_stats_source
ALIGNMENTS = ("content", "relative")  # ModelConfig.alignment
# Symbols each side of the position that the relative alignment's bias tables tell apart
# (`models/text_to_mel/location.py`; the memory planner counts its tables).
RELATIVE_REACH = 8
_COUNTS = (
    "vocab_size", "n_mels", "d_model", "heads", "ff_mult", "text_convs", "text_layers",
    "conv_kernel", "cond_convs", "cond_layers", "cond_latents", "decoder_layers", "prenet_dim",
    "postnet_layers", "postnet_channels", "postnet_kernel", "reduction_factor",
)  # fmt: skip


# Parameter counts with vocab 64 and 80 mels are checked by the tests.
PRESETS: dict[str, dict[str, Any]] = {
    # ~1.4M parameters: the defaults; trains on a CPU (the learning benchmarks' size).
    "tiny": {},
    # ~17M parameters: for a GPU (recipes/gpu-small.yaml).
    "small": dict(
        d_model=320, heads=5, ff_mult=4, text_convs=3, text_layers=3, conv_kernel=5,
        cond_convs=2, cond_layers=2, cond_latents=16, decoder_layers=4, prenet_dim=256,
        postnet_layers=5, postnet_channels=256, postnet_kernel=5,
    ),
    # ~88M parameters: for a GPU.
    "base": dict(
        d_model=768, heads=12, ff_mult=4, text_convs=2, text_layers=3, conv_kernel=3,
        cond_convs=2, cond_layers=1, cond_latents=32, decoder_layers=5, prenet_dim=256,
        postnet_layers=5, postnet_channels=512, postnet_kernel=5,
    ),
    # XTTS v2's GPT size (coqui-ai/TTS `xtts.py`: 30 layers, 1024 wide, 16 heads, 32
    # Perceiver latents of the reference), each decoder layer with its cross-attention:
    # ~690M parameters. For sizing (`xtts-train check --estimate`) and large GPUs.
    "xtts": dict(
        d_model=1024, heads=16, ff_mult=4, text_convs=3, text_layers=6, conv_kernel=5,
        cond_convs=2, cond_layers=6, cond_latents=32, decoder_layers=30, prenet_dim=512,
        postnet_layers=5, postnet_channels=512, postnet_kernel=5,
    ),
    # The tiny model with the voice-cloning settings measured best (recipes/cpu-voices.yaml;
    # docs/train/voice-cloning.md): 4 frames a step, the clip's statistics and pitch
    # carry the voice. Decode it with the `voices` decode preset.
    "tiny-voices": dict(
        reduction_factor=4, voice_stats="mean_std", voice_stats_source="utterance",
        voice_pitch=True,
    ),
}  # fmt: skip

# `decode.preset`: named decoding settings. `voices`: the postfilters and reference length
# measured best for voices never trained on (docs/train/voice-cloning.md).
DECODE_PRESETS: dict[str, dict[str, Any]] = {
    "plain": {},  # the defaults: the loop alone, training's reference crop
    "voices": dict(global_variance=True, reference_frames=1024),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig(FrozenConfig):
    """Sizes of a `TextToMel` model; the defaults are the `"tiny"` preset (~1.4M
    parameters, which trains on a CPU); `small` and `base` are for a GPU (`PRESETS`).

    Attributes:
        vocab_size: token ids are `0 .. vocab_size - 1` (set from the tokenizer).
        n_mels: mel channels of the features the model reads and predicts.
        d_model: width of every transformer; a multiple of `heads`.
        heads: attention heads.
        ff_mult: feed-forward width as a multiple of `d_model`.
        text_convs, text_layers: residual conv layers, then transformer blocks, of the
            text encoder.
        conv_kernel: kernel size of the text and conditioning conv layers.
        cond_convs, cond_layers: conv layers, then transformer blocks, over the
            reference mel.
        cond_latents: L, learned queries that pool the reference into `(B, L, D)`.
        decoder_layers: causal decoder blocks (self-attention, cross-attention, feed-forward).
        prenet_dim: width of the decoder's two-layer frame prenet.
        voice_stats: "off" (the default) or "mean_std": with "mean_std" the decoder reads
            and writes frames normalised by the reference clip's own per-channel mean and
            deviation, its output is moved back by them before the postnet, and the
            conditioning encoder reads the clip normalised the same way (AdaIN-VC's
            instance statistics). The
            clip's statistics then set the voice's spectral statistics, for voices never
            trained on too, by that path alone. With "off", frames are standardised with
            the fixed `MEL_MEAN` and `MEL_STD` alone.
        voice_stats_source: whose statistics normalise the frames in teacher-forced
            training (and its eval losses): "clip" (the default), the reference clip's, as
            in inference; "utterance", those of the utterance being spoken (its real
            frames), so the decoder learns to write frames whose own statistics are the
            ones it is given, and in inference, given the clip's, speaks with the clip's.
            The latents read the clip either way. Needs `voice_stats` on. On 4 espeak-ng
            voices never trained on (44 trained on, 55 minutes on one core each), their
            syntheses were identified as the clip's voice 98% of the time with it and 75%
            without (docs/train/voice-cloning.md; `recipes/cpu-voices.yaml`).
        voice_pitch: every decoder input frame also gets the voice's pitch, projected
            (`Decoder.pitch_term`): the mean and deviation of log2 pitch over the harmonic
            frames (`frames.pitch_stats`, `xtts_audio.mel_pitch`) of the frames the
            statistics come from: the spoken utterance's in teacher forcing with
            `voice_stats_source="utterance"`, the clip's otherwise and in decoding. The
            latents read pitch only as the clip's frames carry it; this states it, for the
            voices whose pitch few training voices share. Off by default; on 4 espeak-ng
            voices never trained on (44 trained on, 55 minutes on one core each, side by
            side), GE2E likeness to the clip 0.873x two recordings' with it and 0.86x
            without, pairing 0.60 and 0.64 (docs/train/voice-cloning.md;
            `recipes/cpu-voices.yaml`).
        prenet_dropout: dropout of the prenet in training (and in the teacher-forced
            eval losses): the decoder never trusts its own previous frame exactly.
        own_frames: in training, the share of decoder steps that read the model's own
            prediction of the frame before them instead of the recording's (scheduled
            sampling in one parallel pass, after Bengio et al. 2015): a first
            teacher-forced pass without gradients predicts every frame, and each step's
            input is drawn from it with this probability. Free-running decoding reads
            only its own frames, smoother than recordings; a decoder trained on
            recordings alone may go on from them at another pace. 0 (the default): no
            first pass; a step costs about a third more with one.
        postnet_layers, postnet_channels, postnet_kernel: the residual conv postnet.
        attention_block: queries per block of every self-attention longer than it (0: the
            whole product at once, as Keras computes it). The dense product keeps each
            layer's `[B, heads, F, F]` probabilities and dropout mask for the backward pass;
            in blocks, each block's scores are recomputed in the backward pass instead
            (`tf.recompute_grad`), so the memory grows linearly in F, and a causal block
            skips the keys after it. Default 256, measured (`xtts-bench attention`, tiny,
            batch 8): at 1,024 frames 0.54x the dense step's memory and 0.87x its time;
            sequences of 256 or fewer run dense.
        dropout: dropout of attention weights and residual branches while training.
            Every dropout rate is drawn from one random byte per element
            (`xtts_train.models.dropout`), so it is rounded to a multiple of 1/256 (0.1 → 0.1016).
        reduction_factor: r, frames predicted per decoder step (Tacotron, Wang et al.
            2017): step `s` reads the last frame of group `s - 1` and writes frames
            `s*r .. s*r + r - 1`, so the decoder runs `ceil(F / r)` steps, its attention
            costs `r**2` times less, and decoding loops `r` times fewer.
        random_positions: in training, the positions of the text's symbols and of the
            decoder's steps start at one offset drawn uniformly from `[0,
            random_positions]` for every batch (randomized positional encodings, Ruoss et
            al. 2023), instead of at 0. The model then sees positions past its training
            lengths, and a position alone no longer tells the stop head the utterance is
            at its usual end, while the distance between a step and a symbol, which
            sinusoidal encodings give attention, is kept. Inference starts at 0. 0 (the
            default) turns it off.
        alignment: how the decoder finds its way along the text: "relative" (the
            default) or "content" (docs/train/alignment.md). The relative one is
            location-relative alignment (Very Attentive Tacotron, Battenberg 2025;
            `models/text_to_mel/location.py`): an alignment layer after the first decoder
            block keeps a position on the text that moves forward every step by a move it
            predicts (at most half a symbol a frame, one a step at least, never past the
            last symbol), and the later blocks' cross-attention is biased by each symbol's
            distance from it. The position is part of the decoding loop's state. Needs
            `decoder_layers` of at least 2. With "content" (the default before issue 67,
            and of runs written before the setting) each cross-attention reads the text
            by content alone, its head 0 guided toward the diagonal.

    `from_preset("tiny", vocab_size=40)` or `from_dict({"preset": "tiny", ...})` starts
    from the sizes of `PRESETS`.
    """

    error_type = ConfigError
    presets = PRESETS

    vocab_size: int = 64
    n_mels: int = 80
    d_model: int = 128
    heads: int = 2
    ff_mult: int = 2
    text_convs: int = 2
    text_layers: int = 2
    conv_kernel: int = 5
    cond_convs: int = 2
    cond_layers: int = 1
    cond_latents: int = 4
    decoder_layers: int = 2
    prenet_dim: int = 128
    prenet_dropout: float = 0.5
    postnet_layers: int = 3
    postnet_channels: int = 128
    postnet_kernel: int = 5
    dropout: float = 0.1
    attention_block: int = 256
    reduction_factor: int = 1
    random_positions: int = 0
    voice_pitch: bool = False
    voice_stats: str = "off"
    voice_stats_source: str = "clip"
    alignment: str = "relative"
    own_frames: float = 0.0

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                self._fail(name, value, "an int >= 1")
        for name in ("attention_block", "random_positions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                self._fail(name, value, "an int >= 0")
        if not isinstance(self.voice_pitch, bool):
            self._fail("voice_pitch", self.voice_pitch, "true or false")
        if self.voice_stats == "mean":
            self._fail("voice_stats", "mean", "off or mean_std: \"mean\" (the mean without "
                       "the deviation) was removed, measured worse: held-out voices "
                       "identified 33% with it against 40% with mean_std "
                       "(docs/train/voice-cloning.md)")  # fmt: skip
        if self.voice_stats not in VOICE_STATS:
            self._fail("voice_stats", self.voice_stats, f"one of {', '.join(VOICE_STATS)}")
        if self.voice_stats_source not in VOICE_STATS_SOURCES:
            self._fail("voice_stats_source", self.voice_stats_source,
                       f"one of {', '.join(VOICE_STATS_SOURCES)}")  # fmt: skip
        if self.voice_stats_source != "clip" and self.voice_stats == "off":
            self._fail("voice_stats_source", self.voice_stats_source,
                       "clip while voice_stats is off (no statistics to take)")  # fmt: skip
        if self.d_model % self.heads:
            self._fail("d_model", self.d_model, f"a multiple of heads={self.heads}")
        if self.alignment not in ALIGNMENTS:
            self._fail("alignment", self.alignment, f"one of {', '.join(ALIGNMENTS)}")
        if self.alignment == "relative" and self.decoder_layers < 2:
            self._fail("decoder_layers", self.decoder_layers,
                       "at least 2 with alignment: relative (the blocks after the first "
                       "attend relative to the position the first one finds)")  # fmt: skip
        for name in ("dropout", "prenet_dropout", "own_frames"):
            value = getattr(self, name)
            if not (_number(value) and 0.0 <= value < 1.0):
                self._fail(name, value, "a rate in [0, 1)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeConfig(FrozenConfig):
    """How a trained `TextToMel` decodes: choices made at inference, none of which shapes
    a weight, so `evaluate`, `synthesize` and `export` may change them for a trained run
    (`--set decode.KEY=VALUE`). The loop's (`window_*`, `stop_gate`) run
    inside `models.text_to_mel.generation`; the postfilter (`global_variance`) is a
    stage applied to the decoded frames
    (`models.text_to_mel.postfilters`); `split_symbols` and `reference_frames` decide
    what is decoded.

    Attributes:
        window_back, window_ahead: each frame's cross-attention
            may read the text symbols from `back` before to `ahead` after the alignment
            head's focus so far (its furthest peak; the speaker latents always), which
            keeps decoding monotonic. With `window_ahead=0` (the default) the window is
            off: on the demo's 150-step model it held the attention on the fifth symbol
            and the mel turned to noise (docs/train/defaults.md).
        global_variance: match the decoded mel's global variance to
            the reference clip's, in the cepstrum (the DCT of each log-mel frame): each
            coefficient's deviation about its mean over the utterance is scaled to its
            deviation over the clip, the mean kept (the GV of Toda & Tokuda 2007, taken
            from the clip). A decoder trained to regress frames writes them smoother than
            speech; this gives back the clip's spectral detail. Off by default; a
            decoding setting, so `evaluate` and `synthesize` may turn it on for a trained
            run (`--set decode.global_variance=true`). On 4 espeak-ng voices never
            trained on (`recipes/cpu-voices.yaml`'s run), it raised the syntheses'
            likeness to their clip from 0.62x to 0.81x of two recordings' by the MFCC
            measure and from 0.84x to 0.86x by a GE2E speaker encoder, and identification
            to 100%, for pairing 0.61 -> 0.63 (docs/train/voice-cloning.md). The
            scaled frames are then held within the levels each channel reaches in the
            clip (`frames.within_range`): unheld, the scaling put a few frames far past
            them, which a vocoder turns into a buzz. It needs the whole utterance, so
            streaming refuses it. End to end through a vocoder fine-tuned on the run's
            frames, two seeds (docs/train/vocoder.md): GE2E likeness +0.073x and
            +0.101x over no stage, of which the hold +0.003x and +0.006x (and pairing
            0.82 -> 0.80); the decoding chain's one stage.
        reference_frames: frames of a reference clip that decoding conditions on
            (its first ones, fewer if it is shorter): the latents, the voice statistics
            and the global variance are then read from more of the voice than training's
            crop. 0 (the default): `data.cond_frames`, the crop's own length; otherwise at
            least that. XTTS conditions on up to 30 s of reference. A decoding setting, as
            `global_variance` is. On 4 espeak-ng voices never trained on
            (`recipes/cpu-voices.yaml`'s run, 128-frame crops in training), reading up to
            1,024 frames of the clip raised the syntheses' likeness to it from 0.81x to
            0.92x of two recordings' by the MFCC measure and from 0.86x to 0.87x by a GE2E
            speaker encoder, for pairing 0.63 -> 0.61 (docs/train/voice-cloning.md).
        split_symbols: a text longer than this many symbols (the
            characters the model reads: IPA with phonemes) is spoken as pieces of at most
            this many, cut at sentence, then clause, then word boundaries
            (`xtts_data.sentences.split_text`). Each piece is decoded alone in the same
            voice and joined with a pause of silence (0.34 s after a sentence, 0.18 s after a
            clause, measured on espeak-ng); 0 turns it off. An autoregressive model loses
            its alignment on text much longer than its training clips: on 24 held-out
            espeak-ng items of 1.3-1.8x the longest training clip, the tiny model after
            45 minutes ended 3 within 15% of their recording's length (10 stopped early,
            11 ran on), and 22 when split (docs/train/long-text.md). The default,
            100, is below the longest training text of the measured corpus (116
            symbols); a decoding setting, as `global_variance` is.
        stop_gate: the stop token may end an utterance only once the
            alignment head's furthest peak (with `model.alignment: relative`, the
            alignment position) is within this many symbols of the text's last
            one (its `<eos>`); before that, a step's stop probabilities are held at 0.5,
            which does not stop. 0 (the default) turns the gate off. A decoding setting.

    `from_dict({"preset": "voices", ...})` starts from `DECODE_PRESETS`' values.
    """

    error_type = ConfigError
    presets = DECODE_PRESETS

    window_back: int = 1
    window_ahead: int = 0
    global_variance: bool = False
    reference_frames: int = 0
    split_symbols: int = 100
    stop_gate: int = 0

    def __post_init__(self) -> None:
        for name in ("window_back", "window_ahead", "reference_frames", "split_symbols",
                     "stop_gate"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                self._fail(name, value, "an int >= 0")
        if not isinstance(self.global_variance, bool):
            self._fail("global_variance", self.global_variance, "true or false")

    @property
    def postfilters(self) -> tuple[str, ...]:
        """The postfilter stages on, in the order they apply."""
        return tuple(name for name in ("global_variance",) if getattr(self, name))


# Parameter counts with 80 mels are checked by the tests.
VOCODER_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(dim=128, intermediate=384, layers=4, disc_channels=4),  # tests, smoke runs
    "small": {},  # the defaults: the CPU vocoder
    # Vocos's own size, and HiFi-GAN's discriminator widths: for a GPU
    "base": dict(dim=512, intermediate=1536, layers=8, disc_channels=32),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class VocoderConfig(FrozenConfig):
    """Sizes and losses of a `Vocoder` (mel frames -> waveform); defaults: the `"small"` preset.

    A Vocos-style network (Siuzdenko 2023): a ConvNeXt backbone at the frame rate, then a
    head that predicts each frame's STFT magnitude and phase, turned into samples by an
    inverse STFT with the audio's hop. All the work runs at the frame rate, not the sample
    rate (HiFi-GAN's upsampling stack), which is what makes it cheap on a CPU.

    Attributes:
        n_mels: mel channels it reads (set from the audio section).
        hop_length: samples per frame (set from the audio section): the vocoder writes
            `frames * hop_length` samples.
        n_fft: frame length of the head's inverse STFT, a multiple of `hop_length` of at
            least two hops (0: `4 * hop_length`, Vocos's).
        dim: width of the backbone; intermediate: width of each ConvNeXt block's
            pointwise expansion; layers: ConvNeXt blocks; kernel: their depthwise
            convolution's kernel (odd).
        mel_weight: weight of the L1 distance between the log-mels of the output and of
            the recording.
        stft_weight: weight of the multi-resolution STFT loss (spectral convergence plus
            log-magnitude L1, averaged over `stft_resolutions`).
        stft_resolutions: (n_fft, hop, window) triples of that loss.
        phase_weight: weight of the anti-wrapping phase losses of APNet (Ai & Ling 2023):
            the head's phases against the recording's STFT phases, as instantaneous phase,
            group delay and instantaneous frequency (`models.vocoder.losses.phase_loss`).

    The adversarial stage (`models.vocoder.discriminators`), trained from a vocoder trained
    without it (`fit --init-from`):
        adversarial: train discriminators beside the vocoder, each with its own AdamW in
            the same compiled step, and add their losses to the vocoder's.
        periods: the periods of HiFi-GAN's multi-period discriminator; the
            multi-resolution one (Vocos's) judges the `stft_resolutions`.
        disc_channels: the discriminators' width (HiFi-GAN's and Vocos's: 32).
        adversarial_weight: weight of the generator's hinge loss.
        feature_weight: weight of the feature-matching loss.
    """

    error_type = ConfigError
    presets = VOCODER_PRESETS

    n_mels: int = 80
    hop_length: int = 256
    n_fft: int = 0
    dim: int = 256
    intermediate: int = 768
    layers: int = 8
    kernel: int = 7
    mel_weight: float = 45.0
    stft_weight: float = 1.0
    stft_resolutions: tuple[tuple[int, int, int], ...] = (
        (512, 128, 512), (1024, 256, 1024), (2048, 512, 2048),
    )  # fmt: skip
    phase_weight: float = 0.0
    adversarial: bool = False
    periods: tuple[int, ...] = (2, 3, 5, 7, 11)
    disc_channels: int = 16
    adversarial_weight: float = 1.0
    feature_weight: float = 2.0

    def __post_init__(self) -> None:
        for name in ("n_mels", "hop_length", "dim", "intermediate", "layers", "kernel",
                     "disc_channels"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                self._fail(name, value, "an int >= 1")
        if self.kernel % 2 == 0:
            self._fail("kernel", self.kernel, "an odd int")
        n_fft, hop = self.n_fft, self.hop_length
        # Hann windows that do not overlap (n_fft < 2 hops) leave samples none covers.
        frames = not isinstance(n_fft, bool) and isinstance(n_fft, int) and n_fft >= 0
        if not frames or (n_fft and (n_fft % hop or n_fft < 2 * hop)):
            self._fail("n_fft", n_fft, f"0 or a multiple of hop_length={hop}, at least {2 * hop}")
        for name in ("mel_weight", "stft_weight", "phase_weight", "adversarial_weight",
                     "feature_weight"):  # fmt: skip
            if not _number(getattr(self, name)) or getattr(self, name) < 0:
                self._fail(name, getattr(self, name), "a number >= 0")
        if not isinstance(self.adversarial, bool):
            self._fail("adversarial", self.adversarial, "true or false")
        periods = self.periods
        if not (isinstance(periods, tuple | list) and all(_is_count(p) for p in periods)):
            self._fail("periods", periods, "a list of ints >= 1")
        object.__setattr__(self, "periods", tuple(periods))
        if self.adversarial and not (self.periods or self.stft_resolutions):
            self._fail(
                "periods",
                periods,
                "a period or an STFT resolution to judge (with vocoder.adversarial=true)",
            )
        resolutions = self.stft_resolutions
        if not (isinstance(resolutions, tuple | list) and all(
            isinstance(r, tuple | list) and len(r) == 3 and all(_is_count(x) for x in r)
            and r[1] <= r[2] <= r[0] for r in resolutions
        )):  # fmt: skip
            expected = "a list of [n_fft, hop, window] ints with hop <= window <= n_fft"
            self._fail("stft_resolutions", resolutions, expected)
        object.__setattr__(self, "stft_resolutions", tuple(tuple(r) for r in resolutions))

    @property
    def frame_length(self) -> int:
        """The head's inverse-STFT frame length: `n_fft`, or `4 * hop_length`."""
        return self.n_fft or 4 * self.hop_length


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig(FrozenConfig):
    """Optimisation and bookkeeping of a training run.

    Attributes:
        steps: optimizer updates to reach (a resumed run continues to this total).
        minutes: a wall-clock budget for each `fit` command's steps, counted from its first
            step (start-up and compiles not included): the step that ends past it is the
            last, saved as after SIGTERM, and `steps` still sets the schedule. How the
            measured CPU recipes were stopped (`steps` is their schedule, the minutes
            their budget). None: train to `steps`.
        learning_rate: peak rate of AdamW, reached after `warmup_steps` linear warm-up,
            then cosine decay to `learning_rate * min_lr_ratio` at `steps`.
        warmup_steps: steps of linear warm-up from 0 to `learning_rate`.
        min_lr_ratio: where the cosine decay ends at `steps`, as a share of `learning_rate`.
        weight_decay: AdamW decoupled weight decay.
        clip_norm: global gradient-norm clipping threshold.
        grad_accum: micro-batches per update, accumulated inside the compiled step (each
            static batch is split in `grad_accum` equal parts; batch sizes must divide).
        precision: `float32`, `mixed_float16` (with dynamic loss scaling) or `mixed_bfloat16`.
        strategy: `auto`, `one-device`, `mirrored` or `multi-worker` (see
            `xtts_train.training.distribute`); batch sizes must divide by replicas x `grad_accum`.
        log_every: steps between host syncs (losses, timings, metrics.jsonl line).
        eval_every: steps between evals (0: never); at the default, 500, the first two
            evals of the tiny model on 600 espeak-ng clips cost 47 s together, their
            programs' one-time compiles included, against about 8 minutes for 500 steps
            on 2 CPU cores (docs/train/defaults.md). What an eval
            does is the task's: a text-to-mel eval speaks `text_to_mel.eval_sentences`
            free-running (the compiled `infer`): audio, mel and attention to TensorBoard,
            their mean alignment score (`sentences_alignment`) to metrics.jsonl. With
            `data.val_fraction > 0` every task's eval runs `eval_batches` validation
            batches (losses); a text-to-mel one also decodes the first utterances of one
            free-running, whose duration ratio and alignment score go to metrics.jsonl.
        eval_batches: validation batches whose losses each eval reports (with
            `data.val_fraction > 0`).
        checkpoint_every: steps between checkpoints.
        keep_checkpoints: the newest checkpoints kept; older ones are deleted.
        allow_retrace: a trace after warm-up warns instead of stopping the run.
        max_nonfinite: consecutive skipped (non-finite) updates that stop the run.
        seed: weight initialisation and data shuffling seed.
        compile_workers: threads that compile the batch shapes' programs at warm-up while
            the next shape is traced (0: one per CPU core; 1 keeps one compile in memory
            at a time).
        compiler: who runs the train, eval and decoding programs: `xla` (compiled by XLA,
            kept in the persistent compile cache), `graph` (TensorFlow's own kernels,
            nothing to compile), or `auto`: per device and role by measurement
            (`xtts_train.compile.compiler.AUTO`: on a CPU the train and eval steps on the graph
            executor and decoding under XLA; XLA throughout on a GPU). Either way each
            program has a static signature, is traced once and a retrace is an error.
        task: what the run trains, by name (`xtts_train.tasks.registry.TASKS`):
            `text_to_mel` (`TextToMel` on the bucketed text/mel batches) or `vocoder`
            (`Vocoder` on random aligned mel/audio segments of a cache built with
            `data.keep_audio`); an unknown name is refused when the run starts, naming
            the known ones.
        memory_budget_gb: plan each bucket's batch size to fill this much memory (the
            process's on a CPU, the device's on a GPU) instead of `data.frame_budget`.
            Before training, `fit` and `check` measure real steps of every bucket in a fresh process
            (`xtts_train.training.planner`) and train with the largest batches whose peak
            stays within 90% of it; the run's config.yaml records them as
            `data.batch_sizes`, which a resume reuses, and its memory_plan.json the plan
            (`xtts-data doctor --plan RUN` prints it and times the pipeline at its
            batches). `null`: the frame budget decides. Tasks with bucketed batches only
            (text-to-mel; the vocoder's one segment shape takes `data.batch_size`).
        init_from: a run folder of the same task and model sizes whose last checkpoint's
            weights the run starts from (fine-tuning), with a fresh optimizer and schedule
            (`xtts_train.training.init_from`). Read when the run starts; a resumed run goes on
            from its own checkpoint. None: fresh weights.
    """

    error_type = ConfigError

    steps: int = 1000
    minutes: float | None = None
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    grad_accum: int = 1
    precision: Precision = "float32"
    strategy: str = "auto"
    log_every: int = 10
    eval_every: int = 500
    eval_batches: int = 8
    checkpoint_every: int = 200
    keep_checkpoints: int = 3
    allow_retrace: bool = False
    max_nonfinite: int = 10
    seed: int = 0
    compile_workers: int = 0
    compiler: str = "auto"
    task: str = "text_to_mel"
    memory_budget_gb: float | None = None
    init_from: str | None = None

    def __post_init__(self) -> None:
        budget = self.memory_budget_gb
        if budget is not None and not (_number(budget) and budget > 0):
            self._fail("memory_budget_gb", budget, "a positive number of GiB, or null")
        if self.minutes is not None and not (_number(self.minutes) and self.minutes > 0):
            self._fail("minutes", self.minutes, "a number of minutes > 0, or null")
        if self.init_from is not None and not (isinstance(self.init_from, str)
                                               and self.init_from.strip()):  # fmt: skip
            self._fail("init_from", self.init_from, "a run folder, or null")
        for name in ("steps", "grad_accum", "log_every", "eval_batches", "checkpoint_every",
                     "keep_checkpoints", "max_nonfinite"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                self._fail(name, value, "an int >= 1")
        for name in ("warmup_steps", "eval_every", "seed", "compile_workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                self._fail(name, value, "an int >= 0")
        for name in ("learning_rate", "clip_norm"):
            if not _number(getattr(self, name)) or getattr(self, name) <= 0:
                self._fail(name, getattr(self, name), "a number > 0")
        if not _number(self.weight_decay) or self.weight_decay < 0:
            self._fail("weight_decay", self.weight_decay, "a number >= 0")
        if not _number(self.min_lr_ratio) or not 0 <= self.min_lr_ratio <= 1:
            self._fail("min_lr_ratio", self.min_lr_ratio, "a number in [0, 1]")
        if self.precision not in _PRECISIONS:
            self._fail("precision", self.precision, f"one of {_PRECISIONS}")
        if self.strategy not in STRATEGIES:
            self._fail("strategy", self.strategy, f"one of {STRATEGIES}")
        if self.compiler not in COMPILERS:
            self._fail("compiler", self.compiler, f"one of {COMPILERS}")
        if not (isinstance(self.task, str) and self.task.isidentifier()):
            self._fail("task", self.task, "a task's name (`xtts_train.tasks.registry.TASKS`)")
        if not isinstance(self.allow_retrace, bool):
            self._fail("allow_retrace", self.allow_retrace, "true or false")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TextToMelConfig(FrozenConfig):
    """How the text-to-mel task (`train.task: text_to_mel`) trains its network: what
    `model` sizes, this section weighs. The loss weights are the compiled steps' float32
    inputs, so changing one compiles nothing (the vocoder's are in its own section).

    Attributes:
        stop_weight, stop_pos_weight: weight of the stop-token loss, and of its positives.
        guided_attention_weight, guided_attention_sigma: weight of the guided-attention
            loss (Tachibana et al. 2017; 0 turns it off) on the decoder's cross-attention
            over the text, and the width of its diagonal band as a share of the text and
            frames (`xtts_train.models.text_to_mel.alignment`).
        forward_sum_weight: weight of the forward-sum alignment loss (Badlani et al.
            2021, as FastPitch and RAD-TTS use it; `alignment.forward_sum_loss`): minus the
            log-probability of every monotonic path through the decoder's alignment over
            the text. 0 (the default) leaves it out of the compiled steps; a change
            between 0 and another value changes the program, between two others it does not.
        alignment_prior: in training, add the log of a static beta-binomial prior
            (Badlani et al. 2021; `alignment.beta_binomial_prior`) to the alignment's
            scores (head 0 of each cross-attention, or the alignment layer's with
            `model.alignment: relative`): attention starts near the diagonal. Off by
            default; the eval losses and decoding never use it (they do not know the
            length).
        eval_sentences: fixed texts spoken free-running at every eval (`train.eval_every`;
            defaults: two Harvard sentences, English; the demo sets
            `xtts_data.DEMO_SENTENCES`, its language's). Read into token ids when the run
            starts, so a symbol outside the vocabulary stops it before any compile.
    """

    error_type = ConfigError

    stop_weight: float = 1.0
    stop_pos_weight: float = 5.0
    guided_attention_weight: float = 10.0
    guided_attention_sigma: float = 0.2
    forward_sum_weight: float = 0.0
    alignment_prior: bool = False
    eval_sentences: tuple[str, ...] = (
        "The birch canoe slid on the smooth planks.",
        "Glue the sheet to the dark blue background.",
    )

    def __post_init__(self) -> None:
        for name in ("stop_pos_weight", "guided_attention_sigma"):
            if not _number(getattr(self, name)) or getattr(self, name) <= 0:
                self._fail(name, getattr(self, name), "a number > 0")
        for name in ("stop_weight", "guided_attention_weight", "forward_sum_weight"):
            if not _number(getattr(self, name)) or getattr(self, name) < 0:
                self._fail(name, getattr(self, name), "a number >= 0")
        if not isinstance(self.alignment_prior, bool):
            self._fail("alignment_prior", self.alignment_prior, "true or false")
        sentences = self.eval_sentences
        if not (isinstance(sentences, tuple | list) and sentences
                and all(isinstance(x, str) and x.strip() for x in sentences)):  # fmt: skip
            self._fail("eval_sentences", sentences, "a non-empty list of texts")
        object.__setattr__(self, "eval_sentences", tuple(sentences))  # frozen, hashable


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class StackConfig(FrozenConfig):
    """The seven sections of a stack config, each in its package's dataclass.

    `to_dict` is what a run's `config.yaml` holds; `from_dict` reads it back (every
    section but `vocoder`, `decode` and `text_to_mel` required: `load_stack_config` is
    the one that fills in defaults).
    """

    error_type = ConfigError

    audio: MelConfig
    data: DataConfig
    model: ModelConfig
    train: TrainConfig
    vocoder: VocoderConfig = dataclasses.field(default_factory=VocoderConfig)
    decode: DecodeConfig = dataclasses.field(default_factory=DecodeConfig)
    text_to_mel: TextToMelConfig = dataclasses.field(default_factory=TextToMelConfig)

    def __post_init__(self) -> None:
        frames = self.decode.reference_frames
        if frames and frames < self.data.cond_frames:
            raise ConfigError(
                f"Expected decode.reference_frames 0 (data.cond_frames) or at least "
                f"data.cond_frames={self.data.cond_frames}, received: {frames}"
            )

    @property
    def reference_frames(self) -> int:
        """Frames of a reference clip that decoding conditions on (its first ones):
        `decode.reference_frames`, or with 0 `data.cond_frames`, the training crop's."""
        return self.decode.reference_frames or self.data.cond_frames


def load_stack_config(
    source: str | Path | Mapping[str, Any] | None, overrides: Sequence[str] = (), *,
    cache: str | Path | None = None, written: bool = False,
) -> StackConfig:  # fmt: skip
    """Read a stack config (or defaults) and apply `section.key=value` overrides.

    Reading and overrides are `xtts_data.config.read_stack`'s: values of overrides are
    parsed as YAML (`train.steps=200`, `data.policy=fixed`, `model.preset=tiny`,
    `data.text.cleaners=basic`), and `audio.*` overrides apply to the `xtts` preset when
    the source has no `audio` section. A `model` section without a preset starts from
    `ModelConfig`'s defaults, the `tiny` preset; the model's `n_mels` follows the audio's.

    With `cache` (what `fit` and `check` train on), the feature settings come from the
    cache's manifest: the audio recipe and the data settings it was built with fill what
    the source and overrides leave out, and a value they give that disagrees is an error.

    Args:
        source: a YAML file (e.g. a run's `config.yaml`), the mapping it holds, or `None`.
        overrides: `section.key=value` settings, applied in order after the source.
        cache: a feature cache folder whose build settings the config takes, or None.
        written: `source` is a run's `config.yaml`: a setting it predates takes the value
            the run was trained with, not today's default (`as_written`).

    Raises:
        ConfigError: unreadable file, unknown section or key, malformed override, an
            invalid value (the message names the field), or a feature setting that
            disagrees with `cache`'s (naming the key and both values).
        CacheError: `cache` is not a feature cache (no readable manifest.json).
    """
    if cache is not None:  # the config's own errors first, then the cache's
        load_stack_config(source, overrides)
    refuse_moved_settings(overrides)
    built = None if cache is None else Manifest.read(cache).settings
    try:  # xtts_data's and xtts_audio's ConfigError: the same meaning here
        sections = read_stack(source, overrides, built=built, sections=SECTIONS)
        audio, data = load_config(sections)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if written:
        sections = as_written(sections)
    _move_settings(sections)
    _drop_removed_settings(sections)
    model = ModelConfig.from_dict(sections["model"], section="model")
    model = dataclasses.replace(model, n_mels=audio.n_mels)
    train = TrainConfig.from_dict(sections["train"], section="train")
    vocoder = VocoderConfig.from_dict(sections["vocoder"], section="vocoder")
    vocoder = dataclasses.replace(vocoder, n_mels=audio.n_mels, hop_length=audio.hop_length)
    decode = DecodeConfig.from_dict(sections["decode"], section="decode")
    text_to_mel = TextToMelConfig.from_dict(sections["text_to_mel"], section="text_to_mel")
    return StackConfig(audio, data, model, train, vocoder, decode, text_to_mel)


# The stack config's sections: `read_stack` refuses any other.
SECTIONS = ("audio", "data", "model", "train", "vocoder", "decode", "text_to_mel")

# Settings that moved to a section of their own (issue 48), old key prefix -> new one:
# runs written before keep the old keys in their `config.yaml`, which still loads.
_MOVED = {
    "model.infer_": "decode.",  # the decoding settings
    **{f"train.{key}": f"text_to_mel.{key}" for key in (
        "stop_weight", "stop_pos_weight", "guided_attention_weight",
        "guided_attention_sigma", "eval_sentences")},  # the text-to-mel task's
}  # fmt: skip


def _moved(key: str) -> str | None:
    """The new name of a setting that moved (`model.infer_window_back` ->
    `decode.window_back`), or None."""
    for old, new in _MOVED.items():
        if key.startswith(old):
            return new + key.removeprefix(old)
    return None


def refuse_moved_settings(overrides: Sequence[str]) -> None:
    """Raises ConfigError for an override of a setting by its old name
    (`model.infer_KEY`, `train.stop_weight`), naming the new one."""
    for override in overrides:
        moved = _moved(override.split("=", 1)[0].strip())
        if moved is not None:
            raise ConfigError(
                f"Expected {moved}=VALUE, received: {override!r}: the setting moved to "
                f"the {moved.split('.')[0]} section"
            )


# Why the pitch contour went (issue 50, item 5), for both of its keys.
_CONTOUR = (
    "the pitch contour and the harmonics it wrote into the decoded frames: on 4 unseen "
    "espeak-ng voices, GE2E likeness 0.760x with decode.global_variance and 0.763x with the "
    "harmonics too (0.762x and 0.766x on a second seed), within what two seeds differ by "
    "(docs/train/vocoder.md)"
)

# Options measured worse and removed (issues 48, 50), `section.key` -> why: a run's
# `config.yaml` with one off still loads; with one on, it was trained (or decodes) in a
# way this version does not.
_REMOVED = {
    "model.voice_input": "the speaker latents' mean added to every decoder input: on 12 "
    "espeak-ng voices, held-out voices identified 27% with it against 52% without "
    "(docs/train/voice-cloning.md)",
    "decode.prenet_dropout": "the prenet's dropout in free-running decoding: on checkpoints "
    "of the peer benchmark's runs, decoding without it was closer to the recordings at 7 "
    "of 8 (docs/train/defaults.md)",
    "model.pitch_contour": _CONTOUR,
    "decode.harmonics": _CONTOUR,
}


# Settings whose default changed, `section.key` -> the value every run written before the
# setting existed was trained with: a run's `config.yaml` without the key reads it so
# (`as_written`), a new config gets today's default.
_EARLIER = {"model.alignment": "content"}  # relative since issue 67


def as_written(sections: Mapping[str, Any]) -> dict[str, Any]:
    """A run's `config.yaml` mapping with the earlier value of every setting it predates
    (`_EARLIER`), so it loads as the run was trained."""
    filled = {name: dict(value) if isinstance(value, Mapping) else value
              for name, value in sections.items()}  # fmt: skip
    for name, value in _EARLIER.items():
        section, key = name.split(".")
        if isinstance(filled.get(section), dict):
            filled[section].setdefault(key, value)
    return filled


# Settings that became constants (issue 48): a `config.yaml` giving their value loads.
_FIXED = {"mel_mean": MEL_MEAN, "mel_std": MEL_STD}


def _drop_removed_settings(sections: dict[str, dict[str, Any]]) -> None:
    for name, why in _REMOVED.items():
        section, key = name.split(".")
        if sections[section].pop(key, False) is not False:
            raise ConfigError(
                f"Expected {name} false or absent, received: {key}=true: the option was "
                f"removed ({why}); a run made with it needs an xtts version before 2026-11-28"
            )
    for section in ("model", "vocoder"):
        for key, value in _FIXED.items():
            given = sections[section].pop(key, value)
            if given != value:
                raise ConfigError(
                    f"Expected {section}.{key} {value} or absent, received: {given!r}: the "
                    f"features' standardisation is fixed (xtts_train.config.{key.upper()}, "
                    f"both networks'); a run trained with another needs an xtts version "
                    f"before 2026-11-28"
                )


def _move_settings(sections: dict[str, dict[str, Any]]) -> None:
    """A config written before a setting moved (a run's `config.yaml`): its old keys'
    values go to the new ones (`model.infer_KEY` -> `decode.KEY`), unless the new section
    gives them."""
    for name in ("model", "train"):
        for key in list(sections[name]):
            moved = _moved(f"{name}.{key}")
            if moved is not None:
                section, new = moved.split(".", 1)
                sections[section].setdefault(new, sections[name].pop(key))
