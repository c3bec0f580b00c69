"""`export --format onnx|litert`: a run and its vocoder as programs that a runtime
without TensorFlow loops over (`xtts_runtime`), in a folder that is the voice (each
program a `.onnx` file, or a `.tflite` LiteRT flatbuffer: `voice_folder.PROGRAMS`):

```
voice.json         the manifest (`xtts_data.voice_folder`): format and version, the
                   programs' format and each one's outputs in order, every file's SHA-256,
                   the settings the runtime needs (audio, text, sizes, each text length's
                   buffer)
tokenizer.json     the run's symbol table
reference.npy      the run's saved reference clip (its mel): the voice spoken by default
clip-{rate}        a reference clip at `rate` Hz → at the run's rate, its span past silence
resample-{rate}    the voice's audio → at `rate` Hz (`portable.OUT_RATES`: Opus's 48 kHz)
features           a clip at the run's rate → its mel features
conditioning       reference mel → latents, statistics, pitch term
prefill            token ids + latents → what every step reads
step-{i}           one decoder step, its cache of bucket i's steps (`portable.buckets`)
slots-{b}          ONNX only: one step of b decoder slots, each row at its own step (the
                   largest bucket's cache): a server decoding b texts side by side
finish             a decoding's frames → the mel (postnet, postfilters)
window             a stream's chunk of the mel (`CHUNK_FRAMES` frames; not written for a
                   decoding with a postfilter that needs the whole utterance)
vocoder            mel → waveform (the iSTFT as a matmul)
weights.bin        ONNX: every weight of 4 KB or more, once (the programs refer to it)
```

The programs are `inference.portable`'s. ONNX: converted by tf2onnx (opset 17) with two
ops written by hand: `Erfc` (Keras's exact GELU) as `1 - Erf`, and
`XlaDynamicUpdateSlice` (the cache written in place) as a `ScatterND` at the start
indices; each layer norm is then fused (`onnx_fusion`: thirteen nodes become three, a
fifth of the step's nodes). LiteRT: TensorFlow's own converter, builtin ops only (no
TensorFlow at run time); a flatbuffer converted from a function keeps its input names
but not its outputs', so voice.json lists them. Written into a temporary folder beside
`out`, then renamed, as `export` does.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
import tqdm

from xtts_audio.windows import CHUNK_FRAMES
from xtts_data.files import replaced_folder
from xtts_data.joins import silence_feature
from xtts_data.voice_folder import PROGRAMS, write_manifest
from xtts_train.errors import XttsTrainError
from xtts_train.inference import portable
from xtts_train.inference.vocoding import check_vocoder
from xtts_train.models.text_to_mel.decoding import text_buffer_frames
from xtts_train.models.text_to_mel.postfilters import postfilters
from xtts_train.onnx_fusion import fuse_layer_norms
from xtts_train.runs.loading import load_reference, load_run, load_vocoder
from xtts_train.runs.media import decoded_frames

__all__ = ["SLOTS", "export_voice"]

OPSET = 17
# The decoder slots' row counts exported by default: xtts-serve's default (4), one (a
# server of one slot) and 8 (`xtts-bench serve`'s).
SLOTS = (1, 4, 8)


def export_voice(workdir: str | Path, out: str | Path, *, vocoder: str | Path,
                 programs: str = "onnx", slots: Sequence[int] | None = None,
                 overrides: Sequence[str] = (), int8_vocoder: bool = False,
                 force: bool = False, progress: bool = True) -> Path:  # fmt: skip
    """Write the run in `workdir` and `vocoder` as a voice folder at `out`.

    Args:
        workdir: a text-to-mel run (`config.yaml`, `tokenizer.json`, a checkpoint).
        out: the folder to create.
        vocoder: a vocoder run trained on the run's audio settings.
        programs: the programs' format: `onnx` (onnxruntime) or `litert` (LiteRT).
        slots: the row counts of the decoder slots' step programs (`slots-{b}.onnx`;
            None: `SLOTS` for onnx, none for litert, which has no slots).
        overrides: `decode.KEY=VALUE` settings of the run's decoding, as `synthesize
            --set`: the voice decodes with them.
        int8_vocoder: the vocoder's matmul weights in int8, its activations quantized as
            it runs (dynamic quantization: `_int8`): about twice as fast, and not
            TensorFlow's samples (docs/runtime.md measures how far).
        force: replace an existing `out`.
        progress: a progress bar of the programs converted.

    Raises:
        OutputExistsError: `out` exists and is not empty, without `force`.
        XttsTrainError: not a run, no checkpoint, a vocoder that is not one or has other
            audio settings, an override of another setting, another format, slots with
            litert, a row count that is not an int >= 1, or tf2onnx missing (the `onnx`
            extra) for onnx.
    """
    workdir, out, vocoder = Path(workdir), Path(out), Path(vocoder)
    if programs not in PROGRAMS:
        raise XttsTrainError(f"Expected programs of one of {sorted(PROGRAMS)}, received: "
                             f"{programs!r}")  # fmt: skip
    if programs == "litert" and slots:
        raise XttsTrainError(f"Expected no decoder slots with litert (the slots bind "
                             f"onnxruntime's buffers), received: {list(slots)}; export "
                             f"--format onnx for xtts-serve --runtime onnx")  # fmt: skip
    slots = _slot_rows(SLOTS if slots is None and programs == "onnx" else slots or ())
    with replaced_folder(out, force=force) as staging:  # `out` checked before any loading
        check_vocoder(vocoder, workdir)
        converter = (_onnx_converter(_SharedWeights(staging / "weights.bin"))
                     if programs == "onnx" else _litert_converter)  # fmt: skip
        stack, model, _ = load_run(workdir, overrides=overrides)
        _, voice_model = load_vocoder(vocoder)
        model.build_weights()
        # The longest piece a text is cut into, with `<eos>` and a language token.
        buckets = portable.buckets(stack, max_symbols=stack.decode.split_symbols + 2)
        outputs = {}
        written = _programs(stack, model, voice_model, buckets, slots)
        for name, program in tqdm.tqdm(written.items(), desc="export", unit="program",
                                       disable=not progress):  # fmt: skip
            data, outputs[name] = converter(program, int8=int8_vocoder and name == "vocoder")
            (staging / f"{name}{PROGRAMS[programs]}").write_bytes(data)
        shutil.copyfile(workdir / "tokenizer.json", staging / "tokenizer.json")
        if (workdir / "reference.npy").exists():
            np.save(staging / "reference.npy", load_reference(workdir, stack))
        write_manifest(staging, _settings(stack, model, buckets, voice_model)
                       | {"programs": programs, "outputs": outputs, "slots": slots,
                          "int8_vocoder": int8_vocoder})  # fmt: skip
    return out


# Weights of at least this many bytes go to weights.bin, each at an offset of a multiple
# of it (a page: onnxruntime can map them rather than read them).
_SHARED_BYTES = 4096


class _SharedWeights:
    """ONNX programs' large weights stored once, in `path` (`weights.bin`, ONNX external
    data), however many programs hold them: the decoder's weights are in every step and
    slots program and the prefill's. Each program refers to its weights' offsets;
    onnxruntime reads them from the file beside it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stored: dict[bytes, tuple[int, int]] = {}  # a weight's digest → (offset, length)
        path.write_bytes(b"")

    def __call__(self, proto) -> None:
        """Move `proto`'s weights of `_SHARED_BYTES` or more to the file (those already
        there referred to, not written again)."""
        import onnx
        from onnx import numpy_helper

        with self.path.open("ab") as weights:
            for tensor in proto.graph.initializer:
                data = numpy_helper.to_array(tensor).tobytes()
                if len(data) < _SHARED_BYTES:
                    continue
                # By value (names differ between programs): its bytes, type and shape.
                digest = hashlib.sha256(
                    data + repr((tensor.data_type, *tensor.dims)).encode()
                ).digest()
                if digest not in self._stored:
                    offset = -(-weights.tell() // _SHARED_BYTES) * _SHARED_BYTES
                    weights.write(bytes(offset - weights.tell()) + data)
                    self._stored[digest] = offset, len(data)
                offset, length = self._stored[digest]
                dims, dtype, label = list(tensor.dims), tensor.data_type, tensor.name
                tensor.Clear()
                tensor.name, tensor.data_type, tensor.data_location = (
                    label,
                    dtype,
                    onnx.TensorProto.EXTERNAL,
                )
                tensor.dims.extend(dims)
                for key, value in (("location", self.path.name), ("offset", str(offset)),
                                   ("length", str(length))):  # fmt: skip
                    tensor.external_data.add(key=key, value=value)


def _slot_rows(slots: Sequence[int]) -> list[int]:
    """The row counts, sorted and checked (none: a voice without slots)."""
    if any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in slots):
        raise XttsTrainError(f"Expected decoder slots of at least one row each, received: "
                             f"{list(slots)}")  # fmt: skip
    return sorted(set(slots))


def _programs(stack, model, voice_model, buckets: list[portable.Bucket],
              slots: list[int]) -> dict[str, portable.Program]:  # fmt: skip
    """The voice folder's programs by file name: the step's at the largest bucket's text
    length with each bucket's cache, and the slots' at the largest's."""
    text, cond_frames = buckets[-1].text, stack.reference_frames
    return {
        **{f"clip-{rate}": portable.clip(stack, rate=rate) for rate in _clip_rates(stack)},
        **{f"resample-{rate}": portable.resampled(stack, rate=rate)
           for rate in _out_rates(stack)},
        "features": portable.features(stack),
        "conditioning": portable.conditioning(model, batch=1, cond_frames=cond_frames),
        "prefill": portable.prefill(model, batch=1, bucket=buckets[-1]),
        **{f"step-{i}": portable.step(model, stack.decode, batch=1,
                                      bucket=portable.Bucket(text=text, steps=b.steps,
                                                             frames=b.frames))
           for i, b in enumerate(buckets)},
        **{f"slots-{b}": portable.step(model, stack.decode, batch=b, bucket=buckets[-1],
                                       rows=True) for b in slots},
        "finish": portable.finish(model, stack.decode, batch=1, cond_frames=cond_frames),
        "vocoder": portable.vocoder(voice_model, batch=1),
        **({"window": portable.window(model, batch=1, chunk=CHUNK_FRAMES)}
           if _streams(stack) else {}),
    }  # fmt: skip


def _streams(stack) -> bool:
    """The decoding has no postfilter that needs the whole utterance."""
    return all(stage.streams for stage in postfilters(stack.decode))


def _clip_rates(stack) -> list[int]:
    """The rates of the clips the voice reads: common ones and the run's own."""
    return sorted({*portable.CLIP_RATES, stack.audio.sample_rate})


def _out_rates(stack) -> list[int]:
    """The rates other than the run's that its audio is resampled to (`OUT_RATES`)."""
    return [rate for rate in portable.OUT_RATES if rate != stack.audio.sample_rate]


def _settings(stack, model, buckets: list[portable.Bucket], voice_model) -> dict:
    """voice.json's settings: what the runtime's loop and text front end read."""
    audio, text, cond_frames = stack.audio, buckets[-1].text, stack.reference_frames
    buffers = [text_buffer_frames(n, stack) for n in range(1, text + 1)]
    return {
        "audio": audio.to_dict(),
        "text": stack.data.text.to_dict(),
        "split_symbols": stack.decode.split_symbols,
        "n_mels": stack.model.n_mels,
        "reduction_factor": stack.model.reduction_factor,
        "cond_frames": cond_frames,
        "min_reference_frames": stack.data.cond_frames,
        "trim_top_db": stack.data.trim_top_db,
        "clip_rates": _clip_rates(stack),
        "out_rates": _out_rates(stack),
        "text_len": text,
        "steps": [b.steps for b in buckets],
        "bucket_text": [b.text for b in buckets],
        # Each text length's buffer (`text_buffer_frames`) and the fewest frames voiced
        # (`decoded_frames`: two per symbol at least), index n - 1 for n token ids.
        "buffers": buffers,
        "floors": [int(decoded_frames(0, n, f, audio)) for n, f in enumerate(buffers, 1)],
        "silence": silence_feature(audio),
        # Silence past the frames voiced that the vocoder's samples of them hear.
        "vocoder_context": voice_model.receptive_frames,
        # A stream's chunks (window.onnx; None: it streams a piece at a time) and the
        # frames each side of a chunk its postnet reads.
        "chunk_frames": CHUNK_FRAMES if _streams(stack) else None,
        "postnet_context": model.postnet.context_frames,
    }


def _output_names(program: portable.Program) -> list[str]:
    """The program's output names in the order a converted program lists its outputs
    (the flattened dict's: by name)."""
    function = program.function.get_concrete_function(*program.signature)
    return tf.nest.flatten({name: name for name in function.structured_outputs})


def _litert_converter(program: portable.Program, *, int8: bool) -> tuple[bytes, list[str]]:
    """program → a LiteRT flatbuffer of builtin ops, and its output names in order; `int8`:
    the converter's dynamic-range quantization (every weight of 1,024 or more values in
    int8, per channel; activations quantized as it runs).

    Converted without `trackable_obj`, by the converter's frozen-graph path (variables
    become constants): given the Keras 3 model, it takes its other path, which left
    weights out in the issue's probe. This one logs a deprecation warning per program,
    kept out of the progress bar."""
    function = program.function.get_concrete_function(*program.signature)
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        converter = tf.lite.TFLiteConverter.from_concrete_functions([function])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if int8:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        data = converter.convert()
    finally:
        absl.setLevel(level)
    return data, _output_names(program)


def _int8(proto):
    """An ONNX vocoder with its ConvNeXt blocks' matmuls (the bulk of its multiply-adds)
    in int8: onnxruntime's dynamic quantization, weights per output channel. The head's
    projection and the inverse DFT stay float: quantized too, they cost 17 dB of the
    samples' agreement with the float vocoder (a probe: 30 against 47 dB) for a fifth
    more speed."""
    import tempfile

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    blocks = [n.name for n in proto.graph.node if n.op_type == "MatMul" and "/block_" in n.name]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "vocoder.onnx"
        quantize_dynamic(proto, path, op_types_to_quantize=["MatMul"], nodes_to_quantize=blocks,
                         per_channel=True, weight_type=QuantType.QInt8)  # fmt: skip
        return onnx.load(path)


def _onnx_converter(share: _SharedWeights):
    """program → ONNX bytes, its large weights moved to `share`'s file, and its output
    names; tf2onnx (the `onnx` extra) or a message naming it."""
    try:
        import tf2onnx
        from onnx import TensorProto
    except ImportError:
        raise XttsTrainError(
            "Expected tf2onnx and onnx for --format onnx, received: not installed; "
            "pip install 'xtts-train[onnx]'"
        ) from None

    def erfc(ctx, node, name, args):  # erfc(x) = 1 - erf(x): ONNX has Erf alone
        node.type = "Erf"
        dtype = tf2onnx.utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
        one = ctx.make_const(tf2onnx.utils.make_name(f"{name}_one"), np.ones([], dtype))
        sub = tf2onnx.utils.make_name(f"{name}_sub")
        sub = ctx.insert_new_node_on_output("Sub", node.output[0], name=sub)
        ctx.replace_inputs(sub, [one.output[0], node.output[0]])

    def update_slice(ctx, node, name, args):  # every index of the update, moved to the start
        operand, update, start = node.input
        shape = ctx.get_shape(update)
        grid = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), -1)
        grid = ctx.make_const(tf2onnx.utils.make_name(f"{name}_grid"), grid.astype(np.int64))
        start = ctx.make_node("Cast", [start], attr={"to": TensorProto.INT64})
        rank = np.array([1] * len(shape) + [len(shape)], np.int64)
        rank = ctx.make_const(tf2onnx.utils.make_name(f"{name}_rank"), rank)
        start = ctx.make_node("Reshape", [start.output[0], rank.output[0]])
        index = ctx.make_node("Add", [grid.output[0], start.output[0]])
        node.type = "ScatterND"
        ctx.replace_inputs(node, [operand, index.output[0], update])

    handlers = {"Erfc": (erfc, []), "XlaDynamicUpdateSlice": (update_slice, [])}

    def convert(program: portable.Program, *, int8: bool) -> tuple[bytes, list[str]]:
        proto, _ = tf2onnx.convert.from_function(
            program.function, input_signature=list(program.signature), opset=OPSET,
            custom_op_handlers=handlers,
        )  # fmt: skip
        fuse_layer_norms(proto)
        names = [output.name for output in proto.graph.output]
        proto = _int8(proto) if int8 else proto
        share(proto)
        return proto.SerializeToString(), names

    return convert
