"""A voice folder's programs, called by name in either format (`voice.json`'s `programs`):
`Program` runs an ONNX file in onnxruntime, `LiteProgram` a LiteRT flatbuffer in LiteRT's
interpreter (XNNPACK). Both take their inputs by name and give their outputs by name, and
both hand the decoding loop a `stepper`: one decoder step after another with the state
fed back, so the loop (`loop.stepping`) does not know which runs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from xtts_data.voice_folder import program_file
from xtts_runtime.errors import VoiceError

__all__ = ["AnyProgram", "LiteProgram", "Program", "Spec", "Stepper", "in_place", "load_program"]

# One decoder step `t` run: the group's frames float32 [1, r, M] and their stop
# probabilities [1, r] (buffers the next call overwrites).
Stepper = Callable[[int], tuple[np.ndarray, np.ndarray]]


def in_place(name: str) -> bool:
    """A state input that onnxruntime writes in place when its output (`next_{name}`) is
    bound to the same buffer: a KV cache, whose one write is a `ScatterND` of the step's
    row, which skips its copy of the whole cache when the output is the input's buffer (a
    copy a cache a step otherwise: a quarter of the small preset's step time; measured
    the same bits over a 616-step decoding, and the tests' equality runs through it).
    The other state (focus, place) is computed by nodes whose inputs other nodes still
    read: it stays in two buffers, one read and one written."""
    return name.startswith("cache_")


class Program:
    """One onnxruntime session, called with its inputs by name and giving its outputs by
    name (the names read once: the step is called hundreds of times a piece)."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self.session = session
        self.inputs = {i.name: i for i in session.get_inputs()}
        self.outputs = [o.name for o in session.get_outputs()]

    def __call__(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs by name, fed `feeds[name]` for each input (other keys unread)."""
        values = self.session.run(self.outputs, {name: feeds[name] for name in self.inputs})
        return dict(zip(self.outputs, values, strict=True))

    def stepper(self, feeds: Mapping[str, np.ndarray]) -> Stepper:
        """Steps from `feeds` (every input; the state's the first step reads), each reading
        the last frame of the group before (`feeds["frame"]` at the first).

        Every buffer is bound to the session once (IO binding): the caches as both input
        and output, written in place (`in_place`); the rest of the state in two sets,
        step `t` reading one and writing the other. Nothing is copied between steps.
        """
        state = [name.removeprefix("next_") for name in self.outputs if name.startswith("next_")]
        swapped = [name for name in state if not in_place(name)]
        # Every buffer is an OrtValue over a numpy array this stepper holds (CPU OrtValues
        # share the array's memory): the per-step inputs `t` and `frame` are written in place.
        t_now, frame = np.zeros([], np.int32), np.array(feeds["frame"])  # frame: (1, 1, M)
        r = self.session.get_outputs()[self.outputs.index("group")].shape[1]
        group = np.zeros([1, r, frame.shape[-1]], np.float32)
        chance = np.zeros([1, r], np.float32)
        held = {name: np.array(feeds[name]) for name in self.inputs
                if name not in (*swapped, "t", "frame")} | {"t": t_now, "frame": frame}  # fmt: skip
        sets = [{name: np.array(feeds[name]) for name in swapped} for _ in range(2)]
        value = ort.OrtValue.ortvalue_from_numpy
        values = [{name: value(array) for name, array in bank.items()} for bank in (held, *sets)]
        outputs = {"group": value(group), "probs": value(chance)}
        bindings = []
        for parity in range(2):  # step t runs bindings[t % 2]: reads sets[t % 2]
            binding = self.session.io_binding()
            for name in self.inputs:
                binding.bind_ortvalue_input(name, (values[1 + parity] | values[0])[name])
            for name in state:
                written = values[0] if in_place(name) else values[2 - parity]
                binding.bind_ortvalue_output(f"next_{name}", written[name])
            for name, bound in outputs.items():
                binding.bind_ortvalue_output(name, bound)
            bindings.append(binding)

        def step(t: int) -> tuple[np.ndarray, np.ndarray]:
            t_now[...] = t
            if t:
                frame[...] = group[:, -1:]
            self.session.run_with_iobinding(bindings[t % 2])
            return group, chance

        return step


@dataclasses.dataclass(frozen=True)
class Spec:
    """An input of a `LiteProgram`: its static shape (-1 where it varies) and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


class LiteProgram:
    """One LiteRT interpreter over a flatbuffer, called as `Program` is. Its outputs are
    named by voice.json (a flatbuffer converted from a function keeps only its inputs'
    names); an input whose shape varies (a mel's frames) is resized when a call's differs.

    Args:
        path: the `.tflite` file.
        outputs: its outputs' names, in the flatbuffer's order.
        threads: the interpreter's threads.

    Raises:
        VoiceError: ai-edge-litert is not installed (the `litert` extra).
    """

    def __init__(self, path: Path, outputs: Sequence[str], *, threads: int) -> None:
        try:
            from ai_edge_litert.interpreter import Interpreter  # the `litert` extra
        except ImportError:
            raise VoiceError(f"Expected ai-edge-litert for the LiteRT voice {path.parent}, "
                             f"received: not installed; pip install "
                             f"'xtts-runtime[litert]'") from None  # fmt: skip
        self._interpreter = Interpreter(model_path=str(path), num_threads=threads)
        details = self._interpreter.get_input_details()
        self.inputs = {d["name"]: Spec(d["name"], tuple(int(n) for n in d["shape_signature"]),
                                       np.dtype(d["dtype"])) for d in details}  # fmt: skip
        self.outputs = list(outputs)
        # Each input's index and shape allocated (None: nothing allocated yet; a program
        # of a clip's samples cannot allocate at its placeholder length).
        self._shapes = {d["name"]: (d["index"], None) for d in details}
        self._out = [d["index"] for d in self._interpreter.get_output_details()]
        self._empty: dict[int, np.ndarray] = {}  # outputs of no elements, by index

    def __call__(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs by name (copies), fed `feeds[name]` for each input."""
        self._load(feeds)
        self._interpreter.invoke()
        return {name: self._empty[i] if i in self._empty else self._interpreter.get_tensor(i)
                for name, i in zip(self.outputs, self._out, strict=True)}  # fmt: skip

    def _load(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Every input set from `feeds`, the tensors allocated again where a shape changed."""
        interpreter = self._interpreter
        resized = False
        for name, (index, shape) in self._shapes.items():
            if np.shape(feeds[name]) != shape:
                interpreter.resize_tensor_input(index, np.shape(feeds[name]), strict=True)
                self._shapes[name], resized = (index, np.shape(feeds[name])), True
        if resized:
            interpreter.allocate_tensors()
            # LiteRT gives no array of a tensor without elements (a run without alignment
            # keys has keys of width 0): made here.
            details = interpreter.get_output_details()
            self._empty = {d["index"]: np.zeros(d["shape"], d["dtype"])
                           for d in details if not d["shape"].all()}  # fmt: skip
        for name, (index, _) in self._shapes.items():
            interpreter.set_tensor(index, np.asarray(feeds[name], self.inputs[name].dtype))

    def stepper(self, feeds: Mapping[str, np.ndarray]) -> Stepper:
        """Steps from `feeds`, as `Program.stepper`'s: the inputs set once, then before
        each step the state outputs of the last copied into its inputs, interpreter
        buffer to interpreter buffer (one copy a cache a step: LiteRT cannot bind an
        output to an input)."""
        interpreter, index = self._interpreter, dict(zip(self.outputs, self._out, strict=True))
        self._load({**feeds, "t": np.zeros([], np.int32)})  # `t` is the step's own
        state = [(self._shapes[name.removeprefix("next_")][0], i) for name, i in index.items()
                 if name.startswith("next_")]  # fmt: skip
        tensor = interpreter.tensor  # a view, dropped before the next invoke (LiteRT's rule)

        def step(t: int) -> tuple[np.ndarray, np.ndarray]:
            if t:
                for into, out in state:
                    tensor(into)()[...] = tensor(out)()
                tensor(self._shapes["frame"][0])()[...] = tensor(index["group"])()[:, -1:]
            interpreter.set_tensor(self._shapes["t"][0], np.asarray(t, np.int32))  # 0-d: no view
            interpreter.invoke()
            return interpreter.get_tensor(index["group"]), interpreter.get_tensor(index["probs"])

        return step


AnyProgram = Program | LiteProgram


def load_program(folder: Path, manifest: Mapping[str, Any], name: str, *,
                 options: ort.SessionOptions, threads: int) -> AnyProgram:  # fmt: skip
    """The program `name` of the voice `folder`, in its manifest's format: onnxruntime
    with `options`, or LiteRT on `threads`."""
    path = folder / program_file(manifest, name)
    if manifest["programs"] == "litert":
        return LiteProgram(path, manifest["outputs"][name], threads=threads)
    return Program(ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]))
