"""Streaming synthesis: mel chunks from `Streaming` join into `Decoding`'s mel, each yielded
once final and before the decoding ends, with no program traced twice; `Vocoding.stream`
joins into the whole mel's vocoding; `synthesize --stream` writes what the unstreamed path
computes and needs a vocoder."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest
import tensorflow as tf
from train_helpers import with_compiler

from xtts_audio import MelConfig
from xtts_train import DecodeConfig, ModelConfig, Streaming, TextToMel, dummy_batch
from xtts_train.cli import main
from xtts_train.config import VocoderConfig
from xtts_train.errors import ConfigError, XttsTrainError
from xtts_train.inference.vocoding import Vocoding
from xtts_train.models.text_to_mel.decoding import Decoding, decoding_inputs
from xtts_train.models.text_to_mel.frames import groups
from xtts_train.models.text_to_mel.slots import SlotDecoding, Slots
from xtts_train.models.vocoder import Vocoder
from xtts_train.runs.loading import load_run_config, load_vocoder
from xtts_train.runs.media import silence_feature

MAX_FRAMES, COND_FRAMES = 43, 16
R2_VOICE = {"reduction_factor": 2, "voice_stats": "mean_std", "voice_pitch": True}
R3_WINDOW_GATE = {"reduction_factor": 3, "decode.window_ahead": 2, "decode.stop_gate": 1}
# Location-relative alignment (`models/text_to_mel/location.py`), two frames a step.
R2_RELATIVE = {"reduction_factor": 2, "alignment": "relative"}


def tiny_model(**overrides) -> TextToMel:
    """A built tiny model whose decoding is deterministic (no prenet dropout)."""
    keras.utils.set_random_seed(0)
    config = ModelConfig.from_preset("tiny", prenet_dropout=0.0, **overrides)
    model = TextToMel(config, MelConfig.from_preset("xtts"))
    model(dummy_batch(model.config))
    return model


def text(seed: int = 0, symbols: int = 10) -> tuple[list[int], np.ndarray]:
    """Token ids ending `<eos>` and a reference mel in the features' range."""
    rng = np.random.default_rng(seed)
    ids = [int(i) for i in rng.integers(2, 40, symbols - 1)] + [1]
    return ids, rng.uniform(-11.5, 2.0, (COND_FRAMES, 80)).astype(np.float32)


class Built:
    """Tiny models and their compiled decodings, each built once for this file's tests
    (compiling is most of their time). `overrides` name a model's settings and, prefixed
    `decode.`, its decoding's. A program reads the model's weights when it runs, so every
    test sets the stop head's bias (`stop_mid_buffer`, or `no_stop`) before it decodes;
    nothing else of a model or a decoding changes."""

    def __init__(self) -> None:
        self._made: dict[tuple, object] = {}

    def _once(self, key: tuple, build: Callable[[], object]):
        if key not in self._made:
            self._made[key] = build()
        return self._made[key]

    def model(self, overrides: dict) -> TextToMel:
        sizes = {k: v for k, v in overrides.items() if not k.startswith("decode.")}
        return self._once(("model", *sorted(sizes.items())), lambda: tiny_model(**sizes))

    def decoding(self, overrides: dict, compiler: str) -> Decoding:
        """A `Decoding` of one row (as `Streaming` decodes)."""

        def build():
            return Decoding(self.model(overrides), decode=decode_config(overrides),
                            cond_frames=COND_FRAMES, max_frames=MAX_FRAMES,
                            compiler=compiler)  # fmt: skip

        return self._once(("decoding", *sorted(overrides.items()), compiler), build)

    def streaming(self, overrides: dict, compiler: str, chunk: int) -> Streaming:
        """A `Streaming`."""

        def build():
            return Streaming(self.model(overrides), decode=decode_config(overrides),
                             cond_frames=COND_FRAMES, max_frames=MAX_FRAMES, chunk_frames=chunk,
                             compiler=compiler)  # fmt: skip

        return self._once(("streaming", *sorted(overrides.items()), compiler, chunk), build)


@pytest.fixture(scope="module")
def built() -> Built:
    """This file's models and decodings, each built at its first use."""
    return Built()


def decode_config(overrides: dict) -> DecodeConfig:
    """The `decode.` settings of `overrides`."""
    return DecodeConfig(**{k.removeprefix("decode."): v for k, v in overrides.items()
                           if k.startswith("decode.")})  # fmt: skip


def stop_mid_buffer(decoding: Decoding, ids: list[int], reference: np.ndarray) -> int:
    """Sets the stop head's bias of `decoding`'s model so the decoding of `ids` stops at
    the frame of the first half of the buffer whose stop logit is the highest, measured by
    `decoding`'s program (the frames do not depend on the stop head; a decoding by another
    program with that model stops there too: the bias lies halfway between that frame's
    logit and the highest before it); returns the length."""
    model = decoding.model
    r = model.config.reduction_factor
    model.stop_head.bias.assign([-20.0] * r)
    inputs = decoding_inputs([ids], [reference], batch_size=1, cond_frames=COND_FRAMES)
    probs = decoding.function(*inputs)["stop_probs"].numpy()[0]
    logits = np.log(probs.astype(np.float64)) - np.log1p(-probs) + 20.0  # bias 0
    peak = int(np.argmax(logits[: MAX_FRAMES // 2]))
    assert peak > 0, "no frame's stop logit beats every earlier one"
    bias = -(logits[peak] + logits[:peak].max()) / 2  # fires at the peak and not before
    model.stop_head.bias.assign([bias] * r)
    return peak + 1


def no_stop(model: TextToMel) -> None:
    """The stop head's bias so that no decoding stops: each fills its buffer."""
    model.stop_head.bias.assign([-20.0] * model.config.reduction_factor)


# The default tier checks every setting, each under one compiler: the graph executor,
# which builds a decoding's programs in a second or two, and XLA (several seconds a
# program) for one representative, the slots' XLA setting (reduction 3, window-ahead, the
# stop gate; no stop, which the gate would hold): its `Streaming` is the one the traces
# and slots tests below stream through, so only its `Decoding` is compiled here. The join
# is the programs' logic, whichever compiler runs them: a stop inside the buffer and frames
# past it are the graph cases', and under XLA (reduction 2, chunks of 6, its default case
# until now) the slow tier's (`hatch run test-slow`, run by CI).
@pytest.mark.parametrize(
    ("overrides", "stop", "min_frames", "chunk", "compiler"),
    [
        ({}, False, 0, 8, "graph"),
        ({}, True, 0, 4, "graph"),
        ({}, True, 30, 8, "graph"),  # past the stop: infer's frames there
        (R2_VOICE, True, 0, 8, "graph"),
        ({"reduction_factor": 3}, False, 0, 5, "graph"),
        ({"decode.window_ahead": 2}, False, 0, 8, "graph"),
        (R3_WINDOW_GATE, False, 0, 8, "xla"),
        pytest.param({"reduction_factor": 2}, True, 20, 6, "xla", marks=pytest.mark.slow),
    ],
)  # fmt: skip
def test_streamed_chunks_join_into_the_decoded_mel(built, overrides, stop, min_frames, chunk,
                                                   compiler):  # fmt: skip
    ids, reference = text()
    decoding = built.decoding(overrides, compiler)
    if stop:
        length = stop_mid_buffer(built.decoding(overrides, "graph"), ids, reference)
    else:
        length = MAX_FRAMES
        no_stop(decoding.model)
    (decoded,) = decoding([ids], reference)
    assert decoded.length == length
    assert length < MAX_FRAMES or not stop
    stream = built.streaming(overrides, compiler, chunk)(ids, reference, min_frames=min_frames)
    chunks = list(stream)
    end = max(length, min_frames)
    assert [len(c) for c in chunks] == [min(chunk, end - a) for a in range(0, end, chunk)]
    mel = np.concatenate(chunks)
    assert mel.dtype == np.float32
    np.testing.assert_allclose(mel, decoded.buffer[:end], atol=1e-4)
    ending = stream.ending
    assert (ending.length, ending.stopped) == (decoded.length, decoded.stopped)
    np.testing.assert_allclose(ending.attention, decoded.attention, atol=1e-5)
    assert ending.alignment == pytest.approx(decoded.alignment, abs=1e-5)


# The settings (and so the streamings, already traced) of two of the join's graph cases.
@pytest.mark.parametrize("overrides", [{}, R2_VOICE], ids=["r1", "r2"])
def test_each_chunk_comes_once_its_postnet_context_is_decoded(built, overrides):
    streaming = built.streaming(overrides, "graph", 8)
    model, r = streaming.model, streaming.model.config.reduction_factor
    no_stop(model)  # the whole buffer
    chunk, reach = 8, model.postnet.context_frames
    stream = streaming(*text())
    assert (stream.decoded, stream.advances) == (0, 0)  # nothing runs before it is asked
    seen = []
    for first, piece in zip(range(0, MAX_FRAMES, chunk), stream, strict=True):
        needed = min(first + len(piece) + reach, MAX_FRAMES)
        assert stream.decoded == min(groups(needed, r) * r, MAX_FRAMES)  # that far, no more
        seen.append((stream.decoded, stream.advances))
    assert seen[0] == (groups(chunk + reach, r) * r, 1)  # most of the buffer still to decode
    assert seen[-1] == (MAX_FRAMES, len({decoded for decoded, _ in seen}))  # one run a step up


def test_streaming_traces_each_program_once(built):
    # The slots' XLA setting, whose test then streams through these programs (compiled
    # for both text buckets here; the first bucket's by the join's XLA case, which streamed
    # a text of it first: still one trace each); with no stop it streams as the plain
    # model does, six chunks in five runs (reduction 3 rounds each run up to a whole step).
    streaming = built.streaming(R3_WINDOW_GATE, "xla", 8)
    no_stop(streaming.model)
    for seed in (0, 1):  # two texts of one bucket, six chunks each
        stream = streaming(*text(seed))
        assert len(list(stream)) == 6
        assert stream.advances == 5
    assert streaming.traces == {"start": 1, "advance": 1, "mel": 1}
    assert len(list(streaming(*text(2, symbols=40)))) == 6  # a second text bucket
    assert streaming.traces == {"start": 2, "advance": 2, "mel": 1}


@pytest.fixture(scope="module")
def vocoder() -> Vocoder:
    """A built tiny vocoder, shared by this file's tests: a `Vocoding` only reads it."""
    keras.utils.set_random_seed(0)
    vocoder = Vocoder(VocoderConfig.from_preset("tiny"))
    vocoder(np.zeros([1, 42, 80], np.float32))  # built: a program's first run creates nothing
    return vocoder


@pytest.fixture(scope="module")
def vocoding(vocoder) -> Vocoding:
    """`vocoder`'s windows of 8 frames, one at a time, by the graph executor."""
    return Vocoding(vocoder, chunk_frames=8, compiler="graph")


@pytest.mark.parametrize(
    ("frames", "pieces"),
    [(30, [30]), (42, [5, 9, 1, 27]), (97, [8] * 12 + [1]), (97, [1] * 97), (100, [64, 36])],
)  # shorter than one window (42 frames), one window, longer  # fmt: skip
def test_streamed_audio_joins_into_the_whole_vocoding(vocoder, vocoding, frames, pieces,
                                                      monkeypatch):  # fmt: skip
    assert vocoding.width == 8 + 2 * 17
    mel = np.random.default_rng(0).uniform(-10.0, 1.0, (frames, 80)).astype(np.float32)
    silence, arrived, runs = -11.5, [0], []
    window = vocoding._programs[1]  # counted: the frames arrived at each run (undone after)
    monkeypatch.setitem(vocoding._programs, 1, lambda x: runs.append(arrived[-1]) or window(x))

    def arriving():
        for start, size in zip(np.cumsum([0, *pieces[:-1]]), pieces, strict=True):
            arrived.append(start + size)
            yield mel[start : start + size]

    chunks = list(vocoding.stream(arriving(), silence=silence))
    assert [len(c) for c in chunks] == [min(8, frames - a) * 256 for a in range(0, frames, 8)]
    assert len(runs) == len(chunks)  # one window a chunk: the prefix is never vocoded again
    whole = vocoding(mel, silence=silence)
    rms = np.sqrt(np.mean(whole**2))
    assert np.abs(np.concatenate(chunks) - whole).max() <= 1e-5 * rms
    if frames >= vocoding.width:  # and that is the network on the whole mel
        network = vocoder(mel[None]).numpy()[0]
        assert np.abs(np.concatenate(chunks) - network).max() <= 1e-4 * rms
    for k, at in enumerate(runs):  # chunk k runs once the frames it hears arrived, no later
        needed = 8 * (k + 1) + vocoding.context
        if needed <= frames:
            assert needed <= at < needed + max(pieces)


@pytest.mark.parametrize("compiler", ["graph", "xla"])
def test_windows_vocoded_together_are_each_what_it_is_alone(vocoder, compiler):
    # A server's streams: their windows of a step in one batch (at the smallest compiled
    # size that holds them), each window's samples those of the same window in other
    # batches with other neighbours, and joined per stream the stream's audio up to float
    # rounding. The warm-up keeps the sizes whose rows round as the largest's.
    together = Vocoding(vocoder, chunk_frames=8, compiler=compiler, batches=(2, 4, 8))
    together.warm_up()
    assert together.batches[-1] == 8
    assert set(together.batches) <= {2, 4, 8}
    rng = np.random.default_rng(1)
    mels = [rng.uniform(-10.0, 1.0, (n, 80)).astype(np.float32) for n in (30, 41, 17)]
    streams = [together.pushed(silence=-11.5) for _ in mels]
    windows = [s.push(m) + s.end() for s, m in zip(streams, mels, strict=True)]
    flat = [w for ws in windows for w in ws]
    assert len(flat) == 4 + 6 + 3
    alone = [together.vocode([w])[0] for w in flat]  # each window alone in its batch
    order = rng.permutation(len(flat))
    mixed = dict(zip(order, together.vocode([flat[i] for i in order]), strict=True))
    for i, samples in enumerate(alone):  # batches of 8 and 5, in another order
        np.testing.assert_array_equal(mixed[i], samples)
    first = 0  # a whole mel runs at batch 1 (`stream`'s program), compiled by the warm-up
    for mel, ws in zip(mels, windows, strict=True):
        joined = np.concatenate(alone[first : first + len(ws)])
        np.testing.assert_allclose(joined, together(mel, silence=-11.5), atol=1e-5)
        first += len(ws)
    assert together.traces == {"vocoder x1": 1, "vocoder x2": 1, "vocoder x4": 1,
                               "vocoder x8": 1}  # fmt: skip


def test_a_vocoder_whose_rows_depend_on_the_batch_vocodes_each_window_alone(vocoder, caplog):
    vocoding = Vocoding(vocoder, chunk_frames=8, compiler="graph", batches=(2, 4))
    batched = vocoding._programs[4]
    vocoding._programs[4] = lambda mel: batched(mel) + tf.reduce_mean(mel[0])  # row 0 heard by all
    vocoding.warm_up()
    assert vocoding.batches == (1,)
    assert "rows depend on their neighbours here: every window runs alone" in caplog.text
    with pytest.raises(ConfigError, match="Expected batches: positive ints"):
        Vocoding(vocoding.model, batches=(0,))


def _wav(path) -> np.ndarray:
    return tf.audio.decode_wav(tf.io.read_file(str(path)))[0][:, 0].numpy()


@pytest.fixture(scope="module")
def graph_runs(run, vocoder_run, tmp_path_factory) -> tuple[Path, Path]:
    """The session's text-to-mel and vocoder runs with `train.compiler: graph`: the CLI's
    streaming is this test's subject, not XLA (on a CPU `auto` decodes and vocodes under
    XLA, a compile per program and call of `main`, most of this test's time). The join of
    XLA's streamed chunks stays tested by test_streamed_chunks_join_into_the_decoded_mel,
    its vocoding by test_windows_vocoded_together_are_each_what_it_is_alone."""
    root = tmp_path_factory.mktemp("graph")
    return (with_compiler(run[1], root / "run", "graph"),
            with_compiler(vocoder_run[1], root / "vocoder", "graph"))  # fmt: skip


def test_synthesize_stream_writes_the_vocoding_of_the_unstreamed_mel(graph_runs, tmp_path,
                                                                     capsys):  # fmt: skip
    workdir, vocoder = graph_runs
    args = ["synthesize", "--run", str(workdir), "--text", "Fine day.", "--max-frames", "48",
            "--vocoder", str(vocoder), "--save-mel"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "whole.wav")]) == 0
    assert main([*args, "--out", str(tmp_path / "streamed.wav"), "--stream",
                 "--chunk-frames", "8"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "first audio after" in out
    whole, streamed = (np.load(tmp_path / f"{name}.npy") for name in ("whole", "streamed"))
    np.testing.assert_allclose(streamed, whole, atol=1e-4)  # the same decoded frames
    stack, network = load_vocoder(vocoder)
    assert stack.train.compiler == "graph"
    vocoding = Vocoding(network, chunk_frames=8, compiler=stack.train.compiler)
    expected = np.clip(vocoding(streamed, silence=silence_feature(stack.audio)), -1.0, 1.0)
    wave = _wav(tmp_path / "streamed.wav")
    assert len(wave) == len(streamed) * load_run_config(workdir, "text_to_mel").audio.hop_length
    np.testing.assert_allclose(wave, expected, atol=1e-4 + 1 / 32768)  # 16-bit rounding


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        (["--stream"], "Expected --vocoder with --stream"),
        (["--chunk-frames", "8"], "--chunk-frames sizes the streamed chunks: pass --stream"),
        (["--stream", "--vocoder", "voc", "--chunk-frames", "0"], "--chunk-frames: expected"),
    ],
)  # fmt: skip
def test_synthesize_stream_refusals_are_one_line_before_anything_loads(flags, match, tmp_path,
                                                                       capsys):  # fmt: skip
    out = tmp_path / "out" / "x.wav"
    args = ["synthesize", "--run", str(tmp_path / "no-run"), "--text", "hi", "--out", str(out)]
    assert main([*args, *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert match in err[0]
    assert not out.parent.exists()


def slot_chunks(slots: Slots, texts: list, joins: list[int]) -> list[list[np.ndarray]]:
    """Every text's chunks from `slots`, text `i` joining before step `joins[i]`, or the
    first step after it with a free row."""
    chunks, streams, step = [[] for _ in texts], {}, 0
    while len(streams) < len(texts) or slots.busy:
        for i, (ids, reference) in enumerate(texts):
            if joins[i] <= step and i not in streams and slots.free:
                streams[i] = slots.join(ids, reference)
        index = {id(s): i for i, s in streams.items()}
        for stream, chunk in slots.step():
            if chunk is not None:
                chunks[index[id(stream)]].append(chunk)
        step += 1
    return chunks


@pytest.mark.parametrize(("overrides", "compiler"), [
    ({}, "graph"),
    (R2_VOICE, "graph"),
    (R3_WINDOW_GATE, "xla"),
    (R2_RELATIVE, "graph"),  # the alignment position is loop state: each row keeps its own
])  # fmt: skip
def test_slots_decode_each_text_exactly_as_it_decodes_alone(built, overrides, compiler):
    decode, model = decode_config(overrides), built.model(overrides)
    texts = [text(0), text(1, symbols=40), text(2, symbols=5), text(3, symbols=20)]
    # The first text stops; the others may not.
    stop_mid_buffer(built.decoding(overrides, "graph"), *texts[0])
    slots = SlotDecoding(model, decode=decode, cond_frames=COND_FRAMES, max_frames=MAX_FRAMES,
                         text_len=40, slots=3, chunk_frames=8, compiler=compiler)  # fmt: skip
    alone = [slot_chunks(Slots(slots), [t], [0])[0] for t in texts]
    # The last waits for a row; steps of at least 3 decoder steps decode past what the
    # nearest chunk needs: the chunks are the same.
    together = slot_chunks(Slots(slots, min_steps=3), texts, [0, 0, 2, 3])
    assert len(together[3]) > 0
    for index, (mine, solo) in enumerate(zip(together, alone, strict=True)):
        assert len(mine) == len(solo)
        for a, b in zip(mine, solo, strict=True):
            if index == 0:  # row 0, as alone: bit for bit, beside any other rows
                np.testing.assert_array_equal(a, b)
            else:  # another row than alone: a row's last bits depend on its index
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
    streaming = built.streaming(overrides, compiler, 8)
    for (ids, reference), mine in zip(texts, together, strict=True):
        streamed = list(streaming(ids, reference))  # padded to its own text bucket
        assert [len(c) for c in mine] == [len(c) for c in streamed]
        np.testing.assert_allclose(np.concatenate(mine), np.concatenate(streamed), atol=1e-4)
    assert slots.traces == {"join": 1, "admit": 1, "advance": 1, "mel": 1}


@pytest.mark.parametrize("overrides", [R2_VOICE, R2_RELATIVE])
def test_a_text_decodes_bit_for_bit_in_its_row_beside_texts_at_other_steps(built, overrides):
    # It joins row 2 while the other rows are 5 steps ahead, and decodes 3 steps a call:
    # the same bits as alone in row 2. (In another row the last bits may differ: measured ~1e-6 after 5 steps, for
    # either alignment, from the row's index alone, so the kernels, not the rows, decide.)
    model = built.model(overrides)
    no_stop(model)
    slots = SlotDecoding(model, decode=decode_config(overrides), cond_frames=COND_FRAMES,
                         max_frames=MAX_FRAMES, text_len=40, slots=3, chunk_frames=8,
                         compiler="graph")  # fmt: skip
    programs, mine = slots.programs(), text(3, symbols=20)

    def admit(context, state, ids_reference, row):
        one = programs.join(*slots.inputs(*ids_reference))
        return programs.admit(context, state, *one, tf.constant(row))

    context, state = admit(*slots.empty(), mine, 2)
    alone = programs.advance(context, state, tf.constant(9))
    context, state = admit(*slots.empty(), text(0), 0)
    context, state = admit(context, state, text(1, symbols=40), 1)
    state = programs.advance(context, state, tf.constant(5))  # the others 5 steps ahead
    context, state = admit(context, state, mine, 2)
    for _ in range(3):  # 3 calls of 3 steps
        state = programs.advance(context, state, tf.constant(3))
    assert state.t.numpy().tolist() == [14, 14, 9]
    for name in ("frames", "probs", "attention", "place"):
        np.testing.assert_array_equal(getattr(state, name)[2], getattr(alone, name)[2])


def test_a_text_that_leaves_frees_its_slot_and_ends_its_chunks(built):
    model = built.model({})
    no_stop(model)  # each text fills its buffer
    slots = Slots(SlotDecoding(model, decode=DecodeConfig(), cond_frames=COND_FRAMES,
                               max_frames=MAX_FRAMES, text_len=10, slots=2, chunk_frames=8,
                               compiler="graph"))  # fmt: skip
    first, second = slots.join(*text(0)), slots.join(*text(1))
    with pytest.raises(XttsTrainError, match="Expected a free slot, received: all 2 busy"):
        slots.join(*text(2))
    assert [s for s, _ in slots.step()] == [first, second]  # a chunk each
    slots.leave(first)
    assert (first.row, slots.free) == (None, 1)
    third = slots.join(*text(2))
    assert third.row == 0
    handed = []
    while slots.busy:
        handed += [s for s, chunk in slots.step() if chunk is None]
    assert handed == [second, third]
    assert first.ending is None
    assert (second.ending.length, third.ending.length) == (MAX_FRAMES, MAX_FRAMES)
    with pytest.raises(XttsTrainError, match="at most 32 tokens"):
        slots.join(*text(3, symbols=33))
    with pytest.raises(
        XttsTrainError, match="Expected min_steps an int >= 1, received: min_steps=0"
    ):
        Slots(slots.decoding, min_steps=0)
