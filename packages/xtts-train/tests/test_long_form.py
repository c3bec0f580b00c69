"""Long text: cut into pieces after normalisation, each piece decoded as it would be alone
(side by side, or streamed in turn), joined with its pause's silence; buffers past a
minute of speech and texts with nothing to say refused."""

from __future__ import annotations

import os
import re
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest
from train_helpers import with_compiler

import xtts_audio as xa
from xtts_data import TextConfig, Tokenizer
from xtts_data.sentences import PAUSE_SECONDS
from xtts_train import DecodeConfig, ModelConfig, TextToMel, XttsTrainError, dummy_batch
from xtts_train.cli import main
from xtts_train.evaluation.held_out import evaluate
from xtts_train.inference.long_form import decode_rows, join_pieces, pause_frames, piece_batch
from xtts_train.models.dropout import seed_states
from xtts_train.models.text_to_mel.decoding import (
    Decoding,
    Ending,
    decoding_inputs,
    row_pieces,
    text_ids,
    text_pieces,
)
from xtts_train.models.text_to_mel.free_running import infer
from xtts_train.runs.loading import load_reference, load_run
from xtts_train.runs.media import decoded_frames, silence_feature
from xtts_train.synthesize import synthesize

TEXT = "Fine day. The dog ran home, then it slept. Good night to all"
LIMIT = ["decode.split_symbols=16"]
AUDIO = xa.MelConfig.from_preset("xtts")


@pytest.fixture(scope="module")
def graph_run(run, tmp_path_factory) -> Path:
    """The session's run with `train.compiler: graph`, for the tests that decode: cutting
    and joining pieces is their subject, not XLA (on a CPU `auto` decodes under XLA, a
    compile per program and call, most of their time). XLA decoding stays tested by
    synthesize in test_languages and test_tasks, evaluate in test_tasks and streaming in
    test_streaming."""
    return with_compiler(run[1], tmp_path_factory.mktemp("graph") / "run", "graph")


@pytest.fixture(scope="module")
def graph_vocoder(vocoder_run, tmp_path_factory) -> Path:
    """The session's vocoder run with `train.compiler: graph`, as `graph_run`'s."""
    return with_compiler(vocoder_run[1], tmp_path_factory.mktemp("graph") / "vocoder", "graph")


@pytest.fixture(scope="module")
def loaded(graph_run):
    """The run's (stack, model, tokenizer), loaded once: the tests only read them."""
    return load_run(graph_run)


def test_a_text_that_fits_is_one_piece_encoded_as_before(loaded):
    stack, _, tokenizer = loaded
    (piece,) = text_pieces(TEXT, stack.data.text, tokenizer, name="t", max_symbols=200)
    assert piece == text_ids(TEXT, stack.data.text, tokenizer, name="t")
    assert piece.pause == 0.0


def test_a_long_text_is_cut_after_normalisation_with_each_piece_s_pause(loaded):
    stack, _, tokenizer = loaded
    pieces = text_pieces("Dr. Hale paid $5. " + TEXT, stack.data.text, tokenizer, name="t",
                         max_symbols=16)  # fmt: skip
    assert len(pieces) >= 4
    assert all(len(p.text) <= 16 for p in pieces)  # the symbols the model reads
    assert pieces[0].text.startswith("doctor hale")  # cut after the cleaners spelled it out
    # "doctor hale paid | five dollars. | fine day. | the dog ran | home, | ...": a pause
    # after each sentence and clause, none inside one.
    assert [p.pause for p in pieces[:5]] == [
        0.0, PAUSE_SECONDS["sentence"], PAUSE_SECONDS["sentence"], 0.0, PAUSE_SECONDS["clause"],
    ]  # fmt: skip
    assert pieces[-1].pause == 0.0
    whole = text_ids("Dr. Hale paid $5. " + TEXT, stack.data.text, tokenizer, name="t")
    assert " ".join(p.text for p in pieces) == whole.text


@pytest.mark.parametrize("text", ["...", " ?! ", "—"])
def test_a_text_of_only_punctuation_has_nothing_to_say(run, text, tmp_path, capsys):
    _, workdir = run
    out = tmp_path / "x.wav"
    assert main(["synthesize", "--run", str(workdir), "--text", text, "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "has nothing to say" in line or "has no symbols of the tokenizer" in line
    assert not out.exists()


def test_a_buffer_past_a_minute_of_speech_is_refused_before_decoding(run, tmp_path, capsys):
    _, workdir = run
    out = tmp_path / "x.wav"
    assert main(["synthesize", "--run", str(workdir), "--text", "Fine day.", "--out", str(out),
                 "--max-frames", "100000"]) == 2  # fmt: skip
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "Expected max_frames <= 5168 (60 s of speech" in line
    assert "max_frames=100000" in line
    assert not out.exists()


def test_row_pieces_keep_the_row_s_language_token():
    tokenizer = Tokenizer(" abcdefgh.,", languages=["en", "fa"])
    ids, _ = tokenizer.encode("abc def. gh, abc.", language="fa")
    pieces = row_pieces(ids, tokenizer, max_symbols=8)
    assert [p.text for p in pieces] == ["abc def.", "gh, abc."]
    assert all(p.ids[0] == ids[0] == tokenizer.language_id("fa") for p in pieces)
    assert all(p.ids[-1] == Tokenizer.EOS for p in pieces)
    assert [p.pause for p in pieces] == [PAUSE_SECONDS["sentence"], 0.0]
    (whole,) = row_pieces(ids, tokenizer, max_symbols=0)
    assert whole.ids == ids


def test_pieces_join_with_silence_and_their_attention_placed_block_by_block():
    tokenizer = Tokenizer(" ab.", languages=[])
    pieces = row_pieces(tokenizer.encode("ab. ba.")[0], tokenizer, max_symbols=3)
    mels = [np.full([3, 80], 1.0, np.float32), np.full([2, 80], 2.0, np.float32)]
    endings = [Ending(3, True, np.ones([3, 4], np.float32), 0.5),
               Ending(2, False, np.full([2, 4], 2.0, np.float32), 1.0)]  # fmt: skip
    spoken = join_pieces(pieces, mels, endings, AUDIO)
    gap = pause_frames(PAUSE_SECONDS["sentence"], AUDIO)
    assert gap == 29  # 0.34 s at 86.13 frames/s
    assert spoken.features.shape == (3 + gap + 2, 80)
    np.testing.assert_array_equal(spoken.features[3 : 3 + gap], silence_feature(AUDIO))
    np.testing.assert_array_equal(spoken.features[3 + gap :], 2.0)
    assert spoken.attention.shape == (3 + gap + 2, 8)
    assert spoken.attention[:3, :4].sum() == 12
    assert spoken.attention[3 + gap :, 4:].sum() == 16
    assert spoken.attention.sum() == 12 + 16  # nothing elsewhere
    assert not spoken.stopped  # the second piece ran to its buffer
    assert spoken.alignment == pytest.approx((0.5 * 3 + 1.0 * 2) / 5)
    assert spoken.lengths == [3, 2]


class _Instant(Decoding):
    """A `Decoding` without a model or programs: its batches of rows decode at once."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def _decode(self, rows, references):
        return [None] * len(rows)


def test_the_decoding_bar_counts_the_pieces(capsys):
    # 5 pieces, 2 at a time: shown (more than one batch), counted piece by piece.
    decode_rows(_Instant(batch_size=2), [[1]] * 5, [np.zeros((1, 1))] * 5, progress=True)
    assert re.search(r"decode: 100%.*\| 5/5 \[.* ?piece/s\]", capsys.readouterr().err)
    decode_rows(_Instant(batch_size=5), [[1]] * 5, [np.zeros((1, 1))] * 5, progress=True)
    assert capsys.readouterr().err == ""  # one batch: no bar


@pytest.mark.parametrize(("pieces", "batch"), [(1, 1), (2, 2), (3, 4), (4, 4), (9, 4)])
def test_pieces_decode_side_by_side_in_few_program_shapes(pieces, batch):
    assert piece_batch(pieces) == batch


def test_a_long_text_is_each_piece_as_it_decodes_alone_joined_streamed_or_not(
        graph_run, loaded, graph_vocoder, tmp_path, capsys):  # fmt: skip
    workdir, vocoder = graph_run, graph_vocoder
    out = tmp_path / "long.wav"
    assert main(["synthesize", "--run", str(workdir), "--text", TEXT, "--out", str(out),
                 "--max-frames", "48", "--save-mel", "--quiet", "--vocoder", str(vocoder),
                 "--set", *LIMIT]) == 0  # fmt: skip
    assert "pieces, each in a 48-frame buffer" in capsys.readouterr().out
    whole = np.load(out.with_suffix(".npy"))
    stack, model, tokenizer = loaded
    assert stack.train.compiler == "graph"
    pieces = text_pieces(TEXT, stack.data.text, tokenizer, name="t", max_symbols=16)
    assert len(pieces) >= 3
    decoding = Decoding(model, decode=stack.decode, cond_frames=stack.reference_frames,
                        max_frames=48,
                        compiler=stack.train.compiler)  # fmt: skip
    reference = load_reference(workdir, stack)
    expected = []
    for piece in pieces:  # one at a time, batch 1
        (decoded,) = decoding([piece.ids], reference)
        frames = int(decoded_frames(decoded.length, len(piece.ids), 48, stack.audio))
        gap = pause_frames(piece.pause, stack.audio)
        expected += [decoded.buffer[:frames],
                     np.full([gap, stack.audio.n_mels], silence_feature(stack.audio))]  # fmt: skip
    np.testing.assert_allclose(whole, np.concatenate(expected), atol=1e-4)
    streamed = synthesize(workdir, TEXT, tmp_path / "streamed.wav", max_frames=48,
                          vocoder=vocoder, overrides=LIMIT, stream=True, chunk_frames=8)  # fmt: skip
    assert streamed.pieces == tuple(p.text for p in pieces)
    assert streamed.first_audio is not None
    np.testing.assert_allclose(streamed.mel, whole, atol=1e-4)


def test_evaluate_speaks_a_long_utterance_as_pieces(graph_run, loaded, cache):
    workdir = graph_run
    whole = evaluate(workdir, cache, split="all", n=3, overrides=["decode.split_symbols=0"])
    split = evaluate(workdir, cache, split="all", n=3, overrides=["decode.split_symbols=4"])
    _, _, tokenizer = loaded
    assert all(row["pieces"] == 1 for row in whole.utterances)
    counts = [row["pieces"] for row in split.utterances]
    assert max(counts) > 1
    for row, count in zip(split.utterances, counts, strict=True):
        pieces = row_pieces(tokenizer.encode(row["text"])[0], tokenizer, max_symbols=4)
        assert count == len(pieces)
        pauses = sum(pause_frames(p.pause, AUDIO) for p in pieces)
        assert row["frames"] >= pauses + count  # each piece decoded at least a frame
    assert split.settings == ["decode.split_symbols=4"]


def test_the_split_setting_is_a_decoding_setting(run, tmp_path, capsys):
    _, workdir = run
    args = ["synthesize", "--run", str(workdir), "--text", "Fine day.", "--out",
            str(tmp_path / "x.wav"), "--set", "decode.split_symbols=-1"]  # fmt: skip
    assert main(args) == 2
    assert "split_symbols" in capsys.readouterr().err


def test_text_config_cannot_split_where_it_has_no_marks():
    # No punctuation at all: pieces are cut at spaces, and every piece still fits.
    config, tokenizer = TextConfig(symbols=None), Tokenizer.from_config(TextConfig(symbols=None))
    text = " ".join(["word"] * 60)
    pieces = text_pieces(text, config, tokenizer, name="t", max_symbols=24)
    assert all(len(p.text) <= 24 for p in pieces)
    assert " ".join(p.text for p in pieces) == text
    assert all(p.pause == 0.0 for p in pieces)


def test_every_refusal_is_the_package_error():
    tokenizer = Tokenizer.from_config(TextConfig(symbols=None))
    with pytest.raises(XttsTrainError, match="has nothing to say"):
        text_pieces("... !", TextConfig(symbols=None), tokenizer, name="the text")


def _model(**overrides) -> TextToMel:
    keras.utils.set_random_seed(0)
    config = ModelConfig.from_preset("tiny", dropout=0.0, prenet_dropout=0.0, **overrides)
    model = TextToMel(config, AUDIO)
    model(dummy_batch(config))
    return model


def test_random_positions_move_training_positions_alone_and_resume_exactly():
    model, plain = _model(random_positions=64), _model()
    assert len(seed_states(model)) == len(seed_states(plain)) + 1  # one offset a batch
    batch = dummy_batch(model.config)
    # Without it, training (no dropout) is deterministic; with it each batch moves.
    first, again = (plain(batch, training=True)["mel_before"] for _ in range(2))
    np.testing.assert_array_equal(first, again)
    saved = [state.numpy() for state in seed_states(model)]
    first, second = (model(batch, training=True)["mel_before"].numpy() for _ in range(2))
    assert np.abs(first - second).max() > 1e-3
    for state, value in zip(seed_states(model), saved, strict=True):  # a resumed run
        state.assign(value)
    np.testing.assert_array_equal(model(batch, training=True)["mel_before"], first)
    # Inference and evaluation start at position 0, as without it.
    inference = [model(batch, training=False)["mel_before"] for _ in range(2)]
    np.testing.assert_array_equal(*inference)


@pytest.fixture(scope="module")
def model_r2() -> TextToMel:
    """A tiny model of reduction 2 for the stop gate's cases (each sets its stop head)."""
    return _model(reduction_factor=2, alignment="content")  # the gate on the peak


@pytest.mark.parametrize("gate", [0, 2])
def test_the_stop_gate_holds_the_stop_until_the_alignment_reaches_the_end(model_r2, gate):
    model, decode = model_r2, DecodeConfig(stop_gate=gate)
    model.stop_head.bias.assign([20.0, 20.0])  # the stop head wants to stop at every step
    rng = np.random.default_rng(0)
    ids = [[int(i) for i in rng.integers(2, 40, n - 1)] + [1] for n in (12, 7)]
    references = [rng.uniform(-11.5, 2.0, (16, 80)).astype(np.float32)] * 2
    result = infer(model, *decoding_inputs(ids, references, batch_size=2, cond_frames=16),
                         max_frames=60, decode=decode)  # fmt: skip
    lengths = result["lengths"].numpy()
    if gate == 0:
        assert list(lengths) == [1, 1]  # the first frame stops it
        return
    for row, length in enumerate(lengths):
        last = len(ids[row]) - 1  # the <eos>
        peaks = np.argmax(result["attention"].numpy()[row, :length, : last + 1], axis=1)
        # No earlier step's peak reached the gate (it would have stopped there), and a
        # decoding that stopped inside the buffer did so at the step whose peak did.
        assert peaks[: length - 1].max(initial=0) < last - gate
        if length < 60:
            assert peaks[-1] >= last - gate
    assert lengths.max() > 1
