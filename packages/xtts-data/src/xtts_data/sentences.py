"""Long text cut into pieces a model can speak one at a time: sentences, then clauses,
then words, packed up to a length.

An autoregressive model trained on clips of a few seconds loses its alignment on text much
longer than those clips (it stops early or runs on). Decoding therefore speaks a long text
as pieces of at most `max_chars` characters, cut where a reader would pause:

1. at sentence ends: `.`, `!`, `?`, `…` and the marks of other scripts (`؟` Arabic
   and Persian, `۔` Urdu, `।` Devanagari, `。！？` CJK), with closing quotes or brackets
   kept on the sentence. A Latin mark ends a sentence only before whitespace (or the end),
   so `5.50` and `e.g.x` stay whole, and never after an English abbreviation the cleaners
   expand (`Dr.`, `Mr.`, `St.`, …) or a single capital letter (`J. Smith`);
2. a sentence longer than `max_chars` at its clause marks: `,`, `;`, `:`, `—` and
   `،`, `؛` (Arabic script), `，；：、` (CJK);
3. a clause still longer at spaces between words, and a word longer than `max_chars` (or a
   run of CJK text without marks) every `max_chars` characters.

Consecutive pieces are then packed, greedily from the start, while the packed text stays
within `max_chars`: a paragraph of short sentences becomes a few pieces of several
sentences each, as XTTS's `split_sentence` packs them. A text with no punctuation at all
is cut only at spaces (step 3). Each piece records how it ended (`Piece.boundary`), which
decides the pause decoding puts after it (`PAUSE_SECONDS`).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Literal

from xtts_data._cleaners import ABBREVIATIONS
from xtts_data.errors import ConfigError

__all__ = ["PAUSE_SECONDS", "Boundary", "Piece", "sentences", "split_text"]

Boundary = Literal["sentence", "clause", "word", "end"]

# Silence decoding puts after a piece, by how it ended. Measured on espeak-ng English
# (24 utterances of several sentences, gaps 40 dB under the peak): 112 gaps between
# words, median 0.34 s after a sentence mark (0.32-0.44 s) and 0.18 s after a comma
# (0.16-0.25 s). A cut between two words gets none: espeak-ng leaves no gap there.
PAUSE_SECONDS: dict[str, float] = {"sentence": 0.34, "clause": 0.18, "word": 0.0, "end": 0.0}

_CLOSERS = "\"')]}»”’"
_LATIN_ENDS = ".!?…"
_WIDE_ENDS = "؟۔।。！？"  # end a sentence with or without a space after them
_CLAUSES = ",;:—،؛，；：、"
_CLOSED = f"[{re.escape(_CLOSERS)}]*"
_SENTENCE_RE = re.compile(rf"(?:[{_LATIN_ENDS}]+{_CLOSED}(?=\s|$)|[{_WIDE_ENDS}]+{_CLOSED})")
_CLAUSE_RE = re.compile(rf"[{_CLAUSES}]+{_CLOSED}")
# A period after these is not a sentence end: the cleaners' English abbreviations and
# single capital letters (initials).
_NOT_AN_END_RE = re.compile(
    r"(?:\b(?:" + "|".join(ABBREVIATIONS) + r")|(?<![^\W\d_])(?-i:[A-Z]))\.$", re.IGNORECASE
)
# Kana, CJK ideographs, and CJK and full-width punctuation: no space between them.
_CJK_RE = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


@dataclasses.dataclass(frozen=True)
class Piece:
    """A piece of a text to decode alone.

    Attributes:
        text: the piece, stripped (its marks kept).
        boundary: how it ended: `"sentence"` (a sentence mark), `"clause"` (a clause
            mark), `"word"` (cut between words, or inside one) or `"end"` (the text's end).
    """

    text: str
    boundary: Boundary

    @property
    def pause_seconds(self) -> float:
        """Silence to put after the piece (`PAUSE_SECONDS` of its boundary)."""
        return PAUSE_SECONDS[self.boundary]


def split_text(text: str, *, max_chars: int) -> list[Piece]:
    """`text` as pieces of at most `max_chars` characters, cut at sentence, then clause,
    then word boundaries and packed (the module's docstring has the rules).

    Args:
        text: what to say, in any script; runs of whitespace count as one space.
        max_chars: the longest piece; 0: no cut (one piece, the whole text).

    Returns:
        The pieces in order, at least one ("" for a blank text). Joined with spaces (no
        space between CJK pieces) they give the text with its whitespace collapsed, but
        for a word longer than `max_chars`, which is cut inside.

    Raises:
        ConfigError: `max_chars` is not an int >= 0.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 0:
        raise ConfigError(f"Expected max_chars an int >= 0 (0: no split), received: "
                          f"max_chars={max_chars!r}")  # fmt: skip
    text = " ".join(text.split())
    if max_chars == 0 or len(text) <= max_chars:
        return [Piece(text, "end")]
    pieces = []
    for sentence in _cut(text, _sentence_ends(text), "sentence"):
        pieces += _fit(sentence, max_chars)
    return _pack(pieces, max_chars)


def sentences(text: str) -> list[str]:
    """`text` cut at its sentence ends alone (step 1 of `split_text`, nothing packed): how
    many sentences a text holds, as the cut sees them."""
    text = " ".join(text.split())
    return [piece.text for piece in _cut(text, _sentence_ends(text), "sentence")]


def _sentence_ends(text: str) -> list[int]:
    """Offsets just past each sentence mark (and its closers) of `text`."""
    return [m.end() for m in _SENTENCE_RE.finditer(text)
            if not _NOT_AN_END_RE.search(text[: m.end()].rstrip(_CLOSERS))]  # fmt: skip


def _cut(text: str, ends: list[int], boundary: Boundary) -> list[Piece]:
    """`text` cut just past each of `ends`: the pieces that end there get `boundary`,
    the rest of the text after the last end (if any) `"end"`; a piece with no letter or
    digit (marks alone) joins the one before."""
    pieces, start = [], 0
    for end in [*ends, len(text)]:
        piece = Piece(text[start:end].strip(), boundary if end in ends else "end")
        if pieces and piece.text and not any(c.isalnum() for c in piece.text):  # "..."
            piece = Piece(_join(pieces.pop().text, piece.text), piece.boundary)
        if piece.text:
            pieces.append(piece)
        start = end
    return pieces


def _fit(piece: Piece, max_chars: int) -> list[Piece]:
    """A sentence longer than `max_chars` cut at clause marks, then words, then
    characters; the last part keeps the sentence's boundary."""
    if len(piece.text) <= max_chars:
        return [piece]
    ends = [m.end() for m in _CLAUSE_RE.finditer(piece.text)]
    parts = _cut(piece.text, ends, "clause") if ends else [Piece(piece.text, "end")]
    fitted = []
    for part in parts:
        fitted += _words(part, max_chars) if len(part.text) > max_chars else [part]
    return [*fitted[:-1], Piece(fitted[-1].text, piece.boundary)]


def _words(part: Piece, max_chars: int) -> list[Piece]:
    """A clause longer than `max_chars` packed a word at a time, a word longer than that
    (or CJK text) cut every `max_chars` characters; the last keeps `part`'s boundary."""
    chunks = []
    for word in part.text.split(" "):
        step = max_chars
        chunks += [Piece(word[i : i + step], "word") for i in range(0, len(word), step)]
    packed = _pack(chunks, max_chars)
    return [*packed[:-1], Piece(packed[-1].text, part.boundary)]


def _pack(pieces: list[Piece], max_chars: int) -> list[Piece]:
    """Consecutive pieces joined while the joined text stays within `max_chars` (the last
    one's boundary is the joined piece's)."""
    packed = [pieces[0]]
    for piece in pieces[1:]:
        joined = _join(packed[-1].text, piece.text)
        if len(joined) <= max_chars:
            packed[-1] = Piece(joined, piece.boundary)
        else:
            packed.append(piece)
    return packed


def _join(left: str, right: str) -> str:
    """Two pieces as one text: no space between CJK characters, one elsewhere."""
    cjk = _CJK_RE.match(left[-1:]) and _CJK_RE.match(right[:1])
    return left + right if cjk else f"{left} {right}"
