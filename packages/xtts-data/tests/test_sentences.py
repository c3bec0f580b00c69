"""Long text cut into pieces: sentences, then clauses, then words, packed up to a length,
in the scripts of the demo languages."""

from __future__ import annotations

import numpy as np
import pytest

from xtts_data import Piece, split_text
from xtts_data._demo_sentences import SENTENCES, join_sentences
from xtts_data.errors import ConfigError
from xtts_data.sentences import PAUSE_SECONDS, sentences


def texts(pieces: list[Piece]) -> list[str]:
    return [p.text for p in pieces]


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        # Sentences first; a period inside a number, after an abbreviation or an initial
        # ends nothing.
        ("Dr. Hale paid $5.50 for it. J. Smith said no! Why? \"Fine.\" Then we left.", 30,
         ["Dr. Hale paid $5.50 for it.", "J. Smith said no! Why? \"Fine.\"", "Then we left."]),
        # Packed greedily: short sentences share a piece up to the limit.
        ("One. Two. Three. Four.", 10, ["One. Two.", "Three.", "Four."]),
        # A sentence past the limit is cut at its clauses, then at words.
        ("Then we left, slowly, into the night; the end", 25,
         ["Then we left, slowly,", "into the night; the end"]),
        ("We walked along the river to the old mill and back", 20,
         ["We walked along the", "river to the old", "mill and back"]),
        # Marks alone join the piece before them.
        ("Hello there. ... And then we saw it.", 20, ["Hello there. ...", "And then we saw it."]),
        # Persian: its question mark and comma.
        ("سلام، حال شما چطور است؟ من خوبم. ممنون از شما، دوست عزیز.", 25,
         ["سلام، حال شما چطور است؟", "من خوبم.", "ممنون از شما، دوست عزیز."]),
        # Chinese: full-width marks end sentences with no space after them, and the
        # pieces join with no space.
        ("我们今天去公园。天气很好，我们很开心！你呢？", 12, ["我们今天去公园。", "天气很好，我们很开心！", "你呢？"]),
        # No punctuation and no spaces: cut every max_chars characters.
        ("x" * 25, 10, ["x" * 10, "x" * 10, "x" * 5]),
    ],
)  # fmt: skip
def test_known_splits(text, max_chars, expected):
    assert texts(split_text(text, max_chars=max_chars)) == expected


def test_a_text_that_fits_or_no_limit_is_one_piece_whitespace_collapsed():
    assert split_text(" One.  Two.\n", max_chars=100) == [Piece("One. Two.", "end")]
    long = "Words and words. " * 50
    assert split_text(long, max_chars=0) == [Piece(long.strip(), "end")]


def test_each_piece_records_how_it_ended_and_its_pause():
    pieces = split_text("First part, second part. Third part without end", max_chars=16)
    assert [(p.text, p.boundary) for p in pieces] == [
        ("First part,", "clause"), ("second part.", "sentence"),
        ("Third part", "word"), ("without end", "end"),
    ]  # fmt: skip
    assert [p.pause_seconds for p in pieces] == [
        PAUSE_SECONDS["clause"], PAUSE_SECONDS["sentence"], 0.0, 0.0,
    ]  # fmt: skip
    assert PAUSE_SECONDS["sentence"] > PAUSE_SECONDS["clause"] > 0


def _words(n: int, seed: int = 0) -> str:
    """`n` words of 2-9 letters with a mark after some: a long text of no language."""
    rng = np.random.default_rng(seed)
    words = []
    for _ in range(n):
        word = "".join(rng.choice(list("abcdefghij"), size=int(rng.integers(2, 10))))
        words.append(word + str(rng.choice(["", "", "", "", ",", "."])))
    return " ".join(words)


@pytest.mark.parametrize("max_chars", [20, 100, 250])
def test_a_2000_character_text_is_cut_into_pieces_that_fit_and_lose_nothing(max_chars):
    text = _words(400)[:2000]
    pieces = split_text(text, max_chars=max_chars)
    assert all(0 < len(p.text) <= max_chars for p in pieces)
    assert " ".join(texts(pieces)) == text
    assert len(pieces) >= len(text) // max_chars


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_every_demo_language_splits_at_its_sentences_and_rejoins(language):
    sentences = list(SENTENCES[language][:6])
    text = join_sentences(sentences, language)
    longest = max(len(s) for s in sentences)
    pieces = split_text(text, max_chars=longest)
    assert all(len(p.text) <= longest for p in pieces)
    joined = join_sentences(texts(pieces), language)
    assert joined == text
    assert len(pieces) > 1
    assert all(p.boundary == "sentence" for p in pieces)


@pytest.mark.parametrize("bad", [-1, 2.5, True, "80"])
def test_a_bad_max_chars_is_refused(bad):
    with pytest.raises(ConfigError, match="max_chars an int >= 0"):
        split_text("Some text.", max_chars=bad)


@pytest.mark.parametrize(
    ("text", "count"),
    [("One. Two? Three!", 3), ("Dr. Hale paid $5.50. J. Smith left", 2), ("no marks at all", 1),
     ("我们今天去公园。天气很好！", 2), ("", 0)],
)  # fmt: skip
def test_sentences_counts_the_sentences_the_cut_sees(text, count):
    assert len(sentences(text)) == count
