"""`read_utterances`: whole utterances with ids, from a cache or a corpus, for evaluation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from data_helpers import AUDIO, DATA, read_records

from xtts_audio import load_wav, mel_features
from xtts_data import (
    CacheError,
    ConfigError,
    Tokenizer,
    Utterance,
    is_validation,
    load_audio,
    normalize_text,
    read_utterances,
    text_to_ids,
    write_demo_corpus,
)

HELD_OUT = dataclasses.replace(DATA, val_fraction=0.3)


def test_a_cache_gives_its_held_out_utterances_whole_in_id_order(cache):
    records = read_records(cache)
    got = read_utterances(cache, HELD_OUT, "val")
    held = sorted(uid for uid in records if is_validation([uid], 0.3).numpy()[0])
    assert [u.id for u in got] == held
    assert 0 < len(got) < len(records)
    for utterance in got:
        assert isinstance(utterance, Utterance)
        np.testing.assert_array_equal(utterance.mel, records[utterance.id]["mel"])
        np.testing.assert_array_equal(utterance.tokens, records[utterance.id]["tokens"])
        assert utterance.speaker == records[utterance.id]["speaker"]
        assert utterance.text
        assert len(utterance.text) == len(utterance.tokens) - 1


@pytest.mark.parametrize("trim_top_db", [None, 30.0])
def test_a_corpus_gives_its_rows_with_features_computed_as_prepare_does(tmp_path, trim_top_db):
    corpus = write_demo_corpus(tmp_path / "corpus", n=3, min_seconds=0.3, max_seconds=0.6).path
    data = dataclasses.replace(DATA, trim_top_db=trim_top_db)
    got = read_utterances(corpus, data, "all", audio=AUDIO, with_audio=True)
    rows = [line.split("|") for line in (corpus / "metadata.csv").read_text().splitlines()]
    cleaned = [normalize_text(row[2], DATA.text) for row in rows]
    tokenizer = Tokenizer.from_texts(DATA.text, cleaned, ["en"])  # as prepare builds it
    assert [u.id for u in got] == sorted(row[0] for row in rows)
    for utterance, (uid, _, spoken) in zip(got, sorted(rows), strict=True):
        ids = text_to_ids(spoken, DATA.text, tokenizer)[0]
        np.testing.assert_array_equal(utterance.tokens, ids)
        assert utterance.text == tokenizer.decode(ids)
        wave = load_audio(corpus / "wavs" / f"{uid}.wav", AUDIO, trim_top_db=trim_top_db)
        np.testing.assert_allclose(utterance.mel, mel_features(wave, AUDIO), atol=1e-5)
        np.testing.assert_array_equal(utterance.audio, wave)  # what the mel was made from
        if trim_top_db is not None:  # the silence the demo corpus pads with is cut
            assert len(wave) < len(load_wav(str(corpus / "wavs" / f"{uid}.wav"))[0])


def test_a_cache_without_waveforms_cannot_give_them(cache):
    assert read_utterances(cache, DATA, "val")[0].audio is None
    with pytest.raises(CacheError, match=r"keep_audio=true --overwrite"):
        read_utterances(cache, DATA, "val", with_audio=True)


def test_too_many_asked_for_is_a_clear_error(cache):
    held = len(read_utterances(cache, HELD_OUT, "val"))
    with pytest.raises(
        ConfigError, match=f"{held + 1} utterances asked for, split 'val' has {held}"
    ):
        read_utterances(cache, HELD_OUT, "val", limit=held + 1)


def test_other_symbols_or_audio_settings_are_errors(cache):
    with pytest.raises(ConfigError, match="tokenised with another symbol table"):
        read_utterances(cache, DATA, "all", tokenizer=Tokenizer("abc"))
    with pytest.raises(CacheError, match="n_mels"):
        read_utterances(cache, DATA, "all", audio=dataclasses.replace(AUDIO, n_mels=40))


@pytest.mark.parametrize(("split", "limit"), [("train", None), ("all", 0), ("all", True)])
def test_bad_arguments(cache, split, limit):
    with pytest.raises(ConfigError, match="Expected"):
        read_utterances(cache, DATA, split, limit=limit)
