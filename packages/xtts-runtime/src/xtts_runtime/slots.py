"""`Slots`: an exported voice's decoder slots (`slots-{b}.onnx`), `b` rows that decode
different pieces side by side, each joining at any step and leaving at its stop
(continuous batching, as `xtts_train.Slots` decodes inside TensorFlow).

Every input of the step program is a buffer bound to the session once (IO binding): a
piece joins by writing its prefill and zero state into its row, in place; step after
step the rows' caches alternate between two bound sets (the program reads one and writes
the other), so a step copies no state. Only a row's own frames and its stop
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
from xtts_runtime.loop import Program, Spoken, piece_steps, prefilled, spoken
from xtts_runtime.voice import Voice

__all__ = ["Row", "Slots"]


class Row:
    """One piece decoding in a row of `Slots`.

    Attributes:
        index: its row; None once it left.
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
    """`rows` decoder slots of `voice`, on its `slots-{rows}` program.

    Used by one thread at a time.

    Raises:
        VoiceError: the folder has no slots program of `rows` rows (those it has named).
    """

    def __init__(self, voice: Voice, *, rows: int) -> None:
        exported = voice.manifest.get("slots", [])
        if rows not in exported:
            raise VoiceError(f"Expected a voice exported with --slots {rows}, received: "
                             f"{voice.folder}, exported for {exported or 'no'} slots; export "
                             f"it again with --slots {rows}")  # fmt: skip
        self.voice, self.rows = voice, rows
        self.program: Program = voice.program(f"slots-{rows}")
        manifest = voice.manifest
        self._r, self._n_mels = manifest["reduction_factor"], manifest["n_mels"]
        inputs = self.program.inputs
        self._state = [o.removeprefix("next_") for o in self.program.outputs
                       if o.startswith("next_")]  # fmt: skip
        # Buffers of the inputs read as the pieces joined (prefill's, the voice's) and of
        # the step's own (`t`, `frame`), then two sets of the state; every one an OrtValue
        # over the array (CPU OrtValues share its memory), so writes in place are read.
        self._held = {n: np.zeros(spec.shape, _DTYPES[spec.type]) for n, spec in inputs.items()
                      if n not in self._state}  # fmt: skip
        self._sets = [{n: np.zeros(inputs[n].shape, _DTYPES[inputs[n].type])
                       for n in self._state} for _ in range(2)]  # fmt: skip
        self._group = np.zeros([rows, self._r, self._n_mels], np.float32)
        self._chance = np.zeros([rows, self._r], np.float32)
        self._bindings = self._bind()
        self._parity = 0  # the next step reads `_sets[_parity]`
        self._rows: list[Row | None] = [None] * rows

    @property
    def free(self) -> int:
        """Rows no piece decodes in."""
        return self._rows.count(None)

    @property
    def busy(self) -> int:
        """Rows a piece decodes in."""
        return self.rows - self.free

    def join(self, voice: Mapping[str, np.ndarray], ids: Sequence[int]) -> Row:
        """Start decoding a piece's token ids (ending `<eos>`) in `voice` (`conditioning`'s)
        in a free row, from the next `step`.

        Raises:
            VoiceError: no free row (call only while `free`).
        """
        if not self.free:
            raise VoiceError(f"Expected a free slot, received: all {self.rows} busy")
        index = self._rows.index(None)
        feeds = prefilled(self.voice.programs, self.voice.manifest, voice, ids)
        for name, array in self._held.items():
            if name in feeds:
                array[index] = feeds[name][0]
        self._held["t"][index] = 0
        for array in self._sets[self._parity].values():
            array[index] = 0
        row = Row(index, voice, count=len(ids), steps=piece_steps(self.voice.manifest, len(ids)),
                  r=self._r, n_mels=self._n_mels)  # fmt: skip
        self._rows[index] = row
        return row

    def leave(self, row: Row) -> None:
        """Free `row` now (its piece is no longer wanted)."""
        if row.index is not None:
            self._rows[row.index], row.index = None, None

    def step(self) -> list[Row]:
        """One decoder step of every busy row.

        Returns:
            The rows that ended at it (stopped or filled their buffers), now free.
        """
        if not self.busy:
            return []
        self.program.session.run_with_iobinding(self._bindings[self._parity])
        self._parity = 1 - self._parity
        t, frame, r = self._held["t"], self._held["frame"], self._r
        ended = []
        for row in self._rows:
            if row is None:
                continue
            i, at = row.index, row.t * r
            row.frames[0, at : at + r], row.probs[0, at : at + r] = self._group[i], self._chance[i]
            frame[i, 0], row.stopped = self._group[i, -1], bool((self._chance[i] > 0.5).any())
            row.t += 1
            t[i] = row.t
            if row.ended:
                ended.append(row)
                self.leave(row)
        return ended

    def spoken(self, row: Row) -> Spoken:
        """An ended row's piece, through `finish` and the vocoder (`decode_piece`'s)."""
        voice = self.voice
        return spoken(voice.programs, voice.manifest, row.voice, row.frames, row.probs, row.count)

    def _bind(self) -> list[ort.IOBinding]:
        """Two bindings: step `t` runs `[t % 2]`, reading `_sets[t % 2]` and writing the
        other set."""
        session, value = self.program.session, ort.OrtValue.ortvalue_from_numpy
        held = {n: value(a) for n, a in self._held.items()}
        sets = [{n: value(a) for n, a in bank.items()} for bank in self._sets]
        outputs = value(self._group), value(self._chance)
        self._values = (held, sets, outputs)  # the OrtValues live as long as the bindings
        bindings = []
        for parity in range(2):
            binding = session.io_binding()
            for name in self.program.inputs:
                binding.bind_ortvalue_input(name, (sets[parity] | held)[name])
            for name in self._state:
                binding.bind_ortvalue_output(f"next_{name}", sets[1 - parity][name])
            binding.bind_ortvalue_output("group", outputs[0])
            binding.bind_ortvalue_output("probs", outputs[1])
            bindings.append(binding)
        return bindings


_DTYPES = {"tensor(float)": np.float32, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}
