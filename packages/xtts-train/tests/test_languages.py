"""Any language end to end: a Persian corpus prepares, trains and speaks; a mixed
English + Persian corpus gives the model a language token; mismatches are clear errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import soundfile
import tensorflow as tf
from train_helpers import MICRO, ONE_SHAPE, as_cli

from xtts_data import prepare
from xtts_train.cli import main
from xtts_train.config import load_stack_config
from xtts_train.errors import XttsTrainError
from xtts_train.models.text_to_mel.decoding import text_ids
from xtts_train.runs.loading import load_run
from xtts_train.synthesize import synthesize
from xtts_train.tasks.registry import fit

ZWNJ = "\u200c"
# Persian rows as users write them: Persian and ASCII digits, ٪, ZWNJ, Arabic ي/ك, a Latin
# word, Arabic punctuation.
PERSIAN = [
    "سلام دوست من.",
    "مصرف GPU در این آزمایش ۲۵٪ بود.",
    f"من می{ZWNJ}خواهم کتاب{ZWNJ}ها را بخوانم.",
    "هوا امروز خوب است، نه؟",
    "۲٪ تا ۴۰٪ تغییر کرد.",
    "كتابهاي جديد رسيد.",
    "قیمت 3.5 میلیون بود.",
    "ما در سال ۱۴۰۲ رفتیم.",
]
ENGLISH = ["Hello there.", "A fine day today.", "The bridge was old.", "We walked home."]


def _speechlike(seconds: float, seed: int) -> np.ndarray:
    """A voiced, pitch-varying tone with noise: enough for a mel to learn from."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 22050)) / 22050
    pitch = 120 + 30 * np.sin(2 * np.pi * 1.5 * t + seed)
    wave = 0.3 * np.sin(2 * np.pi * np.cumsum(pitch) / 22050) + 0.01 * rng.standard_normal(len(t))
    return wave.astype(np.float32)


def _corpus(root, rows: list[tuple[str, str]]):
    """A filelist corpus of `(text, language)` rows with speech-like audio."""
    root.mkdir(parents=True)
    lines = []
    for i, (text, language) in enumerate(rows):
        soundfile.write(root / f"u{i}.wav", _speechlike(0.4 + 0.03 * len(text) / 4, i), 22050)
        lines.append(f"u{i}.wav|{text}|spk|{language}")
    (root / "list.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root / "list.txt"


def _train(root, rows, overrides):
    """Prepare `rows`, then train 2 steps with `xtts-train fit` in this process: on a CPU
    the micro model's steps run on the graph executor, so no compiled program stays here,
    and a process of its own would cost more than the fit."""
    settings = [*ONE_SHAPE, *MICRO, *overrides, "train.steps=2"]
    stack = load_stack_config(None, settings)
    corpus = _corpus(root / "corpus", rows)
    result = prepare(corpus, root / "cache", audio=stack.audio, data=stack.data)
    assert main(["fit", "--data", str(root / "cache"), "--workdir", str(root / "run"),
                 "--quiet", *as_cli(settings)]) == 0  # fmt: skip
    return result, root / "run"


@pytest.fixture(scope="module")
def persian(tmp_path_factory):
    root = tmp_path_factory.mktemp("persian")
    return _train(root, [(text, "") for text in PERSIAN], ["data.text.language=fa"])


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed")
    rows = [(t, "fa") for t in PERSIAN[:4]] + [(t, "en") for t in ENGLISH]
    overrides = ["data.text.language=en", "data.text.languages=[fa]"]
    return _train(root, rows, overrides)


def test_a_persian_corpus_prepares_trains_and_speaks(persian, tmp_path):
    result, run = persian
    assert (result.ok, result.skipped, result.oov, result.dropped) == (8, (), {}, {})
    assert result.languages == {"fa": 8}
    stack, _, tokenizer = load_run(run)
    assert tokenizer.languages == ("fa",)
    assert "ی" in tokenizer.symbols
    assert "ي" not in tokenizer.symbols  # unified to the Persian letter
    assert stack.model.vocab_size == 2 + len(tokenizer.symbols)  # one language: no token
    spoken = synthesize(run, "سلام، ۲۵٪", tmp_path / "fa.wav", max_frames=32)
    assert spoken.text == "سلام, بیست و پنج درصد"
    assert spoken.unknown == {}
    wave, rate = soundfile.read(tmp_path / "fa.wav")
    assert rate == 22050
    assert len(wave) > 0
    assert np.sqrt(np.mean(wave**2)) > 1e-3  # not silent


def test_synthesize_reports_unknown_characters_and_what_the_text_became(persian, tmp_path, capsys):
    _, run = persian
    out = str(tmp_path / "x.wav")
    args = ["synthesize", "--run", str(run), "--out", out, "--max-frames", "16"]
    assert main([*args, "--text", "سلام ж 😀", "--language", "fa"]) == 0
    err = capsys.readouterr().err
    assert "'ж' x1" in err
    assert "'😀' x1" in err
    assert "the text became 'سلام '" in err
    assert main([*args, "--text", "سلام", "--language", "de"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "received: language='de'" in err[0]


def test_a_cache_whose_symbols_disagree_with_the_run_is_an_error(persian, tmp_path):
    _, run = persian
    other = tmp_path / "run"
    shutil.copytree(run, other)
    stack = load_stack_config(None, [*ONE_SHAPE, *MICRO, "data.text.language=fa", "train.steps=3"])
    tokenizer = json.loads((other / "tokenizer.json").read_text())
    tokenizer["symbols"] = tokenizer["symbols"][::-1]  # same size, other ids
    (other / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(XttsTrainError, match=r"symbol table disagrees with the run's"):
        fit(stack, run.parent / "cache", other, progress=False)


def test_a_mixed_corpus_gives_the_model_a_language_token(mixed, tmp_path):
    result, run = mixed
    assert result.languages == {"en": 4, "fa": 4}
    stack, model, tokenizer = load_run(run)
    assert tokenizer.languages == ("en", "fa")
    assert stack.model.vocab_size == 2 + 2 + len(tokenizer.symbols)
    en = text_ids("hello", stack.data.text, tokenizer, name="t", language="en").ids
    fa = text_ids("hello", stack.data.text, tokenizer, name="t", language="fa").ids
    assert (en[0], fa[0]) == (tokenizer.language_id("en"), tokenizer.language_id("fa"))
    assert en[1:] == fa[1:]
    # The learned language embedding conditions every text position, not just its own.
    tokens = tf.constant([en, fa], tf.int32)
    encoded = model.text_encoder(tokens, tf.ones_like(tokens, tf.float32)).numpy()
    assert np.abs(encoded[0, 1:] - encoded[1, 1:]).max() > 1e-4
    spoken = synthesize(run, "سلام", tmp_path / "fa.wav", max_frames=16, language="fa")
    assert spoken.frames > 0
    with pytest.raises(XttsTrainError, match=r"received: language='de'"):
        synthesize(run, "hallo", tmp_path / "de.wav", language="de")


def test_a_multilingual_export_takes_the_language(mixed, tmp_path):
    _, run = mixed
    out = tmp_path / "saved"
    assert main(["export", "--run", str(run), "--out", str(out), "--max-text", "16",
                 "--max-frames", "16"]) == 0  # fmt: skip
    serving = tf.saved_model.load(str(out)).signatures["serving_default"]
    stack, _, tokenizer = load_run(run)
    ids = text_ids("سلام", stack.data.text, tokenizer, name="t", language="fa").ids[1:]
    reference = tf.constant(np.load(run / "reference.npy"))
    result = serving(tokens=tf.constant(ids, tf.int32), reference_mel=reference,
                     language=tf.constant("fa"))  # fmt: skip
    assert 1 <= int(result["length"]) <= 16
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"expected language one of"):
        serving(tokens=tf.constant(ids, tf.int32), reference_mel=reference,
                language=tf.constant("de"))  # fmt: skip
