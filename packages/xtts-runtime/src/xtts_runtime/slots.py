"""`Slots`: an exported voice's decoder slots (`slots-{b}.onnx`), rows that decode
different pieces side by side, each joining at any step and leaving at its stop
(continuous batching, as `xtts_train.Slots` decodes inside TensorFlow), each step on the
smallest exported program that holds the busy rows.

Every input of the step program is a buffer bound to the session once (IO binding): a
piece joins by writing its prefill and zero state into its row, in place; the caches are
bound as their own outputs and written in place (`programs.in_place`), the rest of the
state alternates between two bound sets (the program reads one and writes the other), so
a step copies no state. Only a row's own frames and its stop
probabilities are copied out, into the row's buffers (what `decode_piece` writes).

A row computes what it would alone: no operation of the step mixes rows, so a piece's
frames do not depend on its neighbours or when it joined. Against `decode_piece` (one
row, the cache of its own text bucket) they differ by float rounding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnxruntime as ort

from xtts_runtime.errors import VoiceError
from xtts_runtime.loop import Spoken, piece_steps, prefilled, spoken
from xtts_runtime.programs import Program, in_place
from xtts_runtime.voice import Voice

__all__ = ["Row", "Slots"]


class Row:
    """One piece decoding in a row of `Slots`.

    Attributes:
        index: its row (busy rows are kept first: it moves down as others leave); None once
            it left.
        count: the piece's token ids.
        steps: its buffer's decoder steps.
        t: steps run.
        frames: float32 [1, steps * r, M] decoded so far (zeros after); probs: float32
            [1, steps * r], their stop probabilities.
        stopped: its stop token fired.
    """

    def __init__(self, index: int, voice: Mapping[str, np.ndarray], *, count: int,
                 steps: int, r: int, n_mels: int) -> None:  # fmt: skip
        self.index, self.voice, self.count, self.steps = index, voice, count, steps
        self.t, self.stopped = 0, False
        self.frames = np.zeros([1, steps * r, n_mels], np.float32)
        self.probs = np.zeros([1, steps * r], np.float32)

    @property
    def ended(self) -> bool:
        """It stopped, or filled its buffer."""
        return self.stopped or self.t == self.steps


class Slots:
    """`rows` decoder slots of `voice`: its `slots-{b}` programs for every exported b up
    to `rows` (`rows` among them), each step on the smallest that holds the busy rows.

    The busy rows are kept first: a piece that leaves takes the last busy row's place (its
    state copied in), so a step of b rows reads the first b rows of every buffer (views of
    the same memory, bound once per size). A size whose rows round differently from the
    largest's (checked once, on the same inputs) is not used: a piece's frames never depend
    on how many decode beside it.

    Used by one thread at a time.

    Raises:
        VoiceError: a LiteRT folder (no slots), or one without a slots program of `rows`
            rows (those it has named).
    """

    def __init__(self, voice: Voice, *, rows: int) -> None:
        exported = voice.manifest.get("slots", [])
        if voice.manifest["programs"] != "onnx":
            raise VoiceError(f"Expected an ONNX voice folder for decoder slots, received: "
                             f"{voice.folder}, of {voice.manifest['programs']} programs; "
                             f"export it with --format onnx --slots {rows}")  # fmt: skip
        if rows not in exported:
            raise VoiceError(f"Expected a voice exported with --slots {rows}, received: "
                             f"{voice.folder}, exported for {exported or 'no'} slots; export "
                             f"it again with --slots {rows}")  # fmt: skip
        self.voice, self.rows = voice, rows
        programs = {b: voice.program(f"slots-{b}") for b in sorted(exported) if b <= rows}
        manifest, top = voice.manifest, programs[rows]
        self._r, self._n_mels = manifest["reduction_factor"], manifest["n_mels"]
        state = [o.removeprefix("next_") for o in top.outputs if o.startswith("next_")]
        self._caches = [n for n in state if in_place(n)]  # in `_held`, written in place
        self._state = [n for n in state if not in_place(n)]
        # Buffers of the inputs read as the pieces joined (prefill's, the voice's) and of
        # the step's own (`t`, `frame`), then two sets of the state; every one bound as an
        # OrtValue over the array (CPU OrtValues share its memory), so writes in place are
        # read.
        shapes = {n: (spec.shape, _DTYPES[spec.type]) for n, spec in top.inputs.items()}
        self._held = {n: np.zeros(*shapes[n]) for n in shapes if n not in self._state}
        self._sets = [{n: np.zeros(*shapes[n]) for n in self._state} for _ in range(2)]
        self._group = np.zeros([rows, self._r, self._n_mels], np.float32)
        self._chance = np.zeros([rows, self._r], np.float32)
        self._values: list = []  # the OrtValues live as long as the bindings
        self._bindings = {b: self._bind(program, b) for b, program in programs.items()}
        self._sessions = {b: program.session for b, program in programs.items()}
        self.sizes = self._rounding_alike()
        self._parity = 0  # the next step reads `_sets[_parity]`
        self._rows: list[Row] = []  # the busy rows, in order: row i at index i

    @property
    def free(self) -> int:
        """Rows no piece decodes in."""
        return self.rows - len(self._rows)

    @property
    def busy(self) -> int:
        """Rows a piece decodes in."""
        return len(self._rows)

    def join(self, voice: Mapping[str, np.ndarray], ids: Sequence[int]) -> Row:
        """Start decoding a piece's token ids (ending `<eos>`) in `voice` (`conditioning`'s)
        in a free row, from the next `step`.

        Raises:
            VoiceError: no free row (call only while `free`).
        """
        if not self.free:
            raise VoiceError(f"Expected a free slot, received: all {self.rows} busy")
        index = len(self._rows)
        feeds = prefilled(self.voice.programs, self.voice.manifest, voice, ids)
        for name, array in self._held.items():
            if name in feeds:
                array[index] = feeds[name][0]
        self._held["t"][index] = 0
        for array in (*(self._held[n] for n in self._caches), *self._sets[self._parity].values()):
            array[index] = 0
        row = Row(index, voice, count=len(ids), steps=piece_steps(self.voice.manifest, len(ids)),
                  r=self._r, n_mels=self._n_mels)  # fmt: skip
        self._rows.append(row)
        return row

    def leave(self, row: Row) -> None:
        """Free `row` now (its piece is no longer wanted): the last busy row moves into it."""
        if row.index is None:
            return
        last = self._rows[-1]
        if last is not row:
            for array in (*self._held.values(), *self._sets[self._parity].values()):
                array[row.index] = array[last.index]
            last.index = row.index
            self._rows[row.index] = last
        self._rows.pop()
        row.index = None

    def step(self) -> list[Row]:
        """One decoder step of every busy row, on the smallest program that holds them.

        Returns:
            The rows that ended at it (stopped or filled their buffers), now free.
        """
        if not self._rows:
            return []
        size = next(b for b in self.sizes if b >= len(self._rows))
        self._sessions[size].run_with_iobinding(self._bindings[size][self._parity])
        self._parity = 1 - self._parity
        t, frame, r = self._held["t"], self._held["frame"], self._r
        ended = []
        for row in self._rows:
            i, at = row.index, row.t * r
            row.frames[0, at : at + r], row.probs[0, at : at + r] = self._group[i], self._chance[i]
            frame[i, 0], row.stopped = self._group[i, -1], bool((self._chance[i] > 0.5).any())
            row.t += 1
            t[i] = row.t
            if row.ended:
                ended.append(row)
        for row in ended:
            self.leave(row)
        return ended

    def spoken(self, row: Row) -> Spoken:
        """An ended row's piece, through `finish` and the vocoder (`decode_piece`'s)."""
        voice = self.voice
        return spoken(voice.programs, voice.manifest, row.voice, row.frames, row.probs, row.count)

    def _bind(self, program: Program, size: int) -> list[ort.IOBinding]:
        """Two bindings of `program` (of `size` rows) over the first `size` rows of every
        buffer: step `t` runs `[t % 2]`, reading `_sets[t % 2]` and writing the other, and
        writing the caches where it reads them."""
        value = ort.OrtValue.ortvalue_from_numpy
        views = [{n: a[:size] for n, a in bank.items()} for bank in (self._held, *self._sets)]
        held, *sets = [{n: value(a) for n, a in bank.items()} for bank in views]
        outputs = value(self._group[:size]), value(self._chance[:size])
        self._values.append((views, held, sets, outputs))
        bindings = []
        for parity in range(2):
            binding = program.session.io_binding()
            for name in program.inputs:
                binding.bind_ortvalue_input(name, (sets[parity] | held)[name])
            for name in self._state:
                binding.bind_ortvalue_output(f"next_{name}", sets[1 - parity][name])
            for name in self._caches:
                binding.bind_ortvalue_output(f"next_{name}", held[name])
            binding.bind_ortvalue_output("group", outputs[0])
            binding.bind_ortvalue_output("probs", outputs[1])
            bindings.append(binding)
        return bindings

    def _rounding_alike(self) -> list[int]:
        """The sizes whose rows give the largest's bits on the same inputs (random state,
        every key real), run once at each size; the buffers are zeros again after."""
        rng = np.random.default_rng(0)
        read = (*self._held.values(), *self._sets[0].values())
        for array in read:
            if array.dtype == np.bool_:
                array[...] = True
            elif array.dtype == np.int32:
                array[...] = rng.integers(0, 4, array.shape)
            else:
                array[...] = rng.normal(0.0, 1.0, array.shape)
        inputs = [array.copy() for array in read]
        outputs = {}
        for size, session in self._sessions.items():
            for array, given in zip(read, inputs, strict=True):
                array[...] = given  # the caches as they were before the last size wrote them
            session.run_with_iobinding(self._bindings[size][0])
            outputs[size] = self._group[:size].copy(), self._chance[:size].copy()
        top = outputs[self.rows]
        alike = [b for b, (group, chance) in outputs.items()
                 if np.array_equal(group, top[0][:b])
                 and np.array_equal(chance, top[1][:b])]  # fmt: skip
        for array in (*self._held.values(), *self._sets[0].values(), *self._sets[1].values()):
            array[...] = 0
        return alike


_DTYPES = {"tensor(float)": np.float32, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}
