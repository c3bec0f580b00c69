"""`export`: a trained run as a SavedModel that speaks without xtts installed.

The SavedModel's `serving_default` takes one utterance's token ids (any length up to
`max_text`) and a reference mel (any length; cropped or zero-padded to the run's
`StackConfig.reference_frames`), pads them to static shapes, and runs the model's
decoding (`infer`, a fixed `max_frames` buffer; under XLA where the run's
`train.compiler` resolves to it on the exporting machine, as `synthesize` decodes there).
It returns the mel features, the stop probabilities, the decoded length and a waveform
of the decoded frames (at least two per symbol, as `synthesize`): float32 [samples] in
[-1, 1], `frames * hop_length` of them with a vocoder.

The waveform is Griffin-Lim's (peak 0.9, as `to_waveform`), or with `vocoder` a vocoder
run's (`fit --task vocoder`) trained on the run's audio settings. The vocoder hears the
whole `max_frames` buffer with every frame from the decoded count on replaced by silence
(`silence_feature`, what `Vocoding` pads with): one static shape, [1, max_frames, n_mels],
one program. Its samples are clipped to [-1, 1], not normalised: the vocoder writes the
recordings' level, as `synthesize --vocoder` does. A vocoder of other audio settings is
refused (`check_vocoder`) before anything is loaded or traced.

The run's `tokenizer.json` (the symbol table), `config.yaml` and `reference.npy` travel
along as assets, and with a vocoder its run's `config.yaml` as `vocoder_config.yaml`.

A multilingual run's signature also takes `language`, a string tag of the run's
languages (`tokenizer.json` lists them): the module puts that language's token in front
of `tokens`, which then hold the text's symbol ids and `<eos>` only. An unknown tag fails
the call with a message naming the languages.
"""

from __future__ import annotations

import shutil
import tempfile
import types
from pathlib import Path

import tensorflow as tf
from tensorflow.python.saved_model import save_context  # private: no public save context

from xtts_data.files import replaced_folder
from xtts_train.compile.compiler import resolve
from xtts_train.compile.memory import check_decoding_memory
from xtts_train.errors import XttsTrainError
from xtts_train.inference.vocoding import check_vocoder
from xtts_train.models.text_to_mel.postfilters import decode_frames
from xtts_train.models.vocoder.model import AUTO_COMPILERS
from xtts_train.runs.loading import load_reference, load_run, load_vocoder
from xtts_train.runs.media import decoded_frames, silence_feature, to_waveform

__all__ = ["export"]

_ASSETS = ("tokenizer.json", "config.yaml", "reference.npy")
# The vocoder run's config.yaml, under a name of its own beside the run's.
_VOCODER_CONFIG = "vocoder_config.yaml"


class _Speaker(tf.Module):
    """The serving module: the model, its decoding, the waveform (a vocoder's or
    Griffin-Lim's), and the runs' files as assets.

    Args:
        workdir: the text-to-mel run.
        max_text: the longest token sequence the signature accepts.
        max_frames: the decoding buffer.
        vocoder: a vocoder run with the run's audio settings (checked by the caller), or
            None: Griffin-Lim.
        griffin_lim_iters: Griffin-Lim's iterations (None: `to_waveform`'s default).
        scratch: a folder that lives until the module is saved (the vocoder's config is
            copied there under its asset name).
    """

    def __init__(self, workdir: Path, *, max_text: int, max_frames: int,
                 vocoder: Path | None, griffin_lim_iters: int | None,
                 scratch: Path) -> None:  # fmt: skip
        super().__init__()
        stack, self.model, tokenizer = load_run(workdir)
        check_decoding_memory(stack.model, max_frames, text_len=max_text, text_name="max_text")
        if (workdir / "reference.npy").exists():
            load_reference(workdir, stack)  # a damaged clip is an error, not an asset
        self.audio, self.max_text, self.max_frames = stack.audio, max_text, max_frames
        self.decode = stack.decode
        self.cond_frames, self.n_mels = stack.reference_frames, stack.model.n_mels
        self.griffin_lim = {} if griffin_lim_iters is None else {"n_iter": griffin_lim_iters}
        assets = {name: workdir / name for name in _ASSETS if (workdir / name).exists()}
        self.vocoder = None
        # The decoding and the vocoder's call are traced once, inside `speak`, whose graph
        # carries them: held outside the module's tracked attributes, since saving lists
        # every tracked `tf.function` for serialization, which traces each again.
        self._inner = types.SimpleNamespace()
        if vocoder is not None:
            _, self.vocoder = load_vocoder(vocoder)
            self.silence = silence_feature(stack.audio)
            vocoder_xla = resolve(stack.train.compiler, "decode", table=AUTO_COMPILERS) == "xla"
            self._inner.vocode_buffer = tf.function(
                self._vocoder_call, jit_compile=vocoder_xla, autograph=False
            )
            assets[_VOCODER_CONFIG] = Path(
                shutil.copyfile(vocoder / "config.yaml", scratch / _VOCODER_CONFIG)
            )
        self.assets = {name: tf.saved_model.Asset(str(path)) for name, path in assets.items()}
        xla = resolve(stack.train.compiler, "decode") == "xla"  # as decoding runs here
        self._inner.decode = tf.function(self._infer, jit_compile=xla, autograph=False)
        signature = [
            tf.TensorSpec([None], tf.int32, name="tokens"),
            tf.TensorSpec([None, self.n_mels], tf.float32, name="reference_mel"),
        ]
        self.languages = list(tokenizer.language_tokens)
        if self.languages:
            ids = [tokenizer.language_id(tag) for tag in self.languages]
            self.language_ids = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(self.languages, ids), default_value=-1
            )
            signature.append(tf.TensorSpec([], tf.string, name="language"))
            self.speak = tf.function(
                self._speak_language, input_signature=signature, autograph=False
            )
        else:
            self.speak = tf.function(self._speak, input_signature=signature, autograph=False)
        # Keras keeps its dropout seed states outside `model.variables`: track them and
        # every variable the traced decoding (and vocoder) reads, or the SavedModel cannot
        # hold them (a traced function may capture a seed state it never reads). The
        # vocoder has no dropout: its weights are all among the variables read.
        self.seed_states = self.model.seed_states()
        # Traced once, as saving traces it: under a save context, whose variable policy is
        # part of a tf.function's cache key (traced outside one, saving traces the whole
        # decoding again: ~5 s for the micro model, minutes for a large one).
        with save_context.save_context(tf.saved_model.SaveOptions()):
            traced = self.speak.get_concrete_function()
        self.variables_read = list(traced.graph.variables)

    def _infer(self, tokens, token_mask, cond_mel, cond_lengths):
        return decode_frames(self.model, self.decode, tokens, token_mask, cond_mel, cond_lengths,
                             max_frames=self.max_frames)  # fmt: skip

    def _vocoder_call(self, mel):
        return self.vocoder(mel)

    def _speak_language(self, tokens, reference_mel, language):
        token = self.language_ids.lookup(tf.strings.lower(language))
        tf.debugging.assert_non_negative(
            token, message=f"expected language one of {self.languages}"
        )
        return self._speak(tf.concat([token[None], tokens], 0), reference_mel)

    def _speak(self, tokens, reference_mel):
        count = tf.shape(tokens)[0]
        tf.debugging.assert_less_equal(
            count, self.max_text, message=f"expected at most {self.max_text} tokens"
        )
        padded = tf.pad(tokens, [[0, self.max_text - count]])[None]  # (1, T)
        padded.set_shape([1, self.max_text])
        mask = tf.sequence_mask(count, self.max_text, tf.float32)[None]  # (1, T)
        cond = reference_mel[: self.cond_frames]
        cond_length = tf.shape(cond)[0]
        cond = tf.pad(cond, [[0, self.cond_frames - cond_length], [0, 0]])[None]  # (1, C, M)
        cond.set_shape([1, self.cond_frames, self.n_mels])
        result = self._inner.decode(padded, mask, cond, cond_length[None])
        length = result["lengths"][0]
        mel = result["mel"][0]  # (max_frames, M)
        frames = decoded_frames(length, count, self.max_frames, self.audio)
        if self.vocoder is None:
            wave = to_waveform(mel[:frames], self.audio, **self.griffin_lim)
        else:
            wave = self._vocode(mel, frames)
        return {"mel": mel, "stop_probs": result["stop_probs"][0], "length": length,
                "waveform": wave}  # fmt: skip

    def _vocode(self, mel: tf.Tensor, frames: tf.Tensor) -> tf.Tensor:
        """The vocoder's samples of the first `frames` frames of the decoded buffer.

        Args:
            mel: float32 [max_frames, n_mels], the decoded buffer.
            frames: int32 [], frames to keep (<= max_frames).

        Returns:
            float32 [frames * hop_length] in [-1, 1].
        """
        decoded = tf.range(self.max_frames) < frames  # (max_frames,)
        heard = tf.where(decoded[:, None], mel, self.silence)  # (max_frames, M)
        wave = self._inner.vocode_buffer(heard[None])[0]  # (max_frames * hop,)
        return tf.clip_by_value(wave[: frames * self.audio.hop_length], -1.0, 1.0)


def export(workdir: str | Path, out: str | Path, *, max_text: int = 256,
           max_frames: int = 400, vocoder: str | Path | None = None,
           griffin_lim_iters: int | None = None, force: bool = False) -> Path:  # fmt: skip
    """Write the run in `workdir` as a SavedModel at `out`.

    Written into a temporary folder next to `out`, then renamed: `out` is either the old
    export or the complete new one.

    Args:
        workdir: a training run (`config.yaml`, `tokenizer.json`, a checkpoint).
        out: the SavedModel folder to create.
        max_text: the longest token sequence the signature accepts.
        max_frames: the decoding buffer; speech longer than this is cut.
        vocoder: a vocoder run (`fit --task vocoder`) trained on this run's audio
            settings, whose last checkpoint writes the waveform output; None: Griffin-Lim.
        griffin_lim_iters: Griffin-Lim iterations for the waveform output (None:
            `to_waveform`'s default, 32); only without `vocoder`.
        force: replace an existing `out`.

    Raises:
        OutputExistsError: `out` exists and is not empty, without `force`.
        XttsTrainError: not a run, no checkpoint, a bad size, `griffin_lim_iters` with a
            `vocoder`, or a vocoder that is not a vocoder run or has other audio settings
            (each field named, both values; checked before anything is loaded).
    """
    workdir, out = Path(workdir), Path(out)
    for name, value in (("max_text", max_text), ("max_frames", max_frames),
                        ("griffin_lim_iters", griffin_lim_iters)):  # fmt: skip
        if value is None and name == "griffin_lim_iters":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise XttsTrainError(f"Expected {name} an int >= 1, received: {name}={value!r}")
    if vocoder is not None:  # the settings first: nothing is loaded or traced for a misfit
        if griffin_lim_iters is not None:
            raise XttsTrainError(
                f"Expected griffin_lim_iters only without a vocoder (the vocoder writes the "
                f"waveform), received: griffin_lim_iters={griffin_lim_iters!r}"
            )
        vocoder = Path(vocoder)
        check_vocoder(vocoder, workdir)
    with (
        replaced_folder(out, force=force) as staging,
        tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as scratch,
    ):
        module = _Speaker(workdir, max_text=max_text, max_frames=max_frames, vocoder=vocoder,
                          griffin_lim_iters=griffin_lim_iters, scratch=Path(scratch))  # fmt: skip
        tf.saved_model.save(module, str(staging), signatures={"serving_default": module.speak})
    return out
