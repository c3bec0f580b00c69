"""A text as a model reads it, piece by piece: normalised (`text.normalize_texts`), cut
into pieces of at most a number of symbols (`sentences.split_text`: sentences, then
clauses, then words), each encoded by a run's `Tokenizer` with the pause that follows it.

Without TensorFlow: the training side's decodings (`xtts_train`) and the runtime that
speaks exported programs (`xtts_runtime`) read a text through these same functions.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

from xtts_audio.config import MelConfig
from xtts_data.errors import ConfigError
from xtts_data.sentences import Piece, split_text
from xtts_data.text import TextConfig, Tokenizer, normalize_texts

__all__ = ["Encoded", "TextError", "pause_frames", "row_pieces", "text_ids", "text_pieces"]


def pause_frames(seconds: float, audio: MelConfig) -> int:
    """Frames of a pause of `seconds` at the recipe's frame rate: between the pieces of a
    text (`Encoded.pause`) and between the utterances of a joined training item."""
    return round(seconds * audio.sample_rate / audio.hop_length)


class TextError(ConfigError):
    """A text with nothing a run can say: no symbol of its tokenizer, or only punctuation,
    after normalisation; or a language the run lacks."""


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A text as the model reads it.

    Attributes:
        ids: token ids (the language token first in a multilingual run), ending `<eos>`.
        text: what the model reads: the cleaned text (IPA with phonemes) without the
            characters the symbol table lacks.
        unknown: characters left out, with counts: removed by cleaning, or missing from
            the run's symbol table.
        pause: seconds of silence after it, as a piece of a longer text (`text_pieces`;
            0 for the last piece and a whole text).
    """

    ids: list[int]
    text: str
    unknown: dict[str, int]
    pause: float = 0.0


def text_ids(text: str, config: TextConfig, tokenizer: Tokenizer, *, name: str,
             language: str | None = None) -> Encoded:  # fmt: skip
    """The token ids of `text`, normalised with `config` in `language` (`None`: the
    config's), and what was left out on the way.

    Raises:
        TextError: no symbol of `tokenizer` is left after normalisation, only
            punctuation is, or the run has no such language; `name` says where the text
            came from.
    """
    (encoded,) = text_pieces(text, config, tokenizer, name=name, language=language)
    return encoded


def text_pieces(text: str, config: TextConfig, tokenizer: Tokenizer, *, name: str,
                language: str | None = None, max_symbols: int = 0) -> list[Encoded]:  # fmt: skip
    """`text` normalised with `config` in `language` (`None`: the config's), then cut into
    pieces of at most `max_symbols` characters of what the model reads (its symbols: IPA
    with phonemes) by `xtts_data.sentences.split_text` (sentences, then clauses, then
    words), each encoded alone.

    Cutting after normalisation counts the symbols the model reads, whatever the script,
    and sees numbers and abbreviations already spelled out; phonemes keep the sentence
    and clause marks that the cut looks for.

    Args:
        max_symbols: the longest piece; 0, or a text that fits: one piece, the text's
            `text_ids`.

    Returns:
        The pieces in order, each with the pause that follows it (`Encoded.pause`).

    Raises:
        TextError: no symbol of `tokenizer` is left after normalisation (in the text
            or a piece), only punctuation is, or the run has no such language; `name`
            says where the text came from.
    """
    try:
        tag = config.row_language(language)
        (cleaned,) = normalize_texts([text], config, [tag])
    except ConfigError as error:
        raise TextError(f"{name}: {error}") from None
    pieces = split_text(cleaned.text, max_chars=max_symbols)
    if len(pieces) == 1:  # the cleaned text as it is, not re-spaced
        return [_encoded(text, cleaned.text, cleaned.dropped, tokenizer, tag, name)]
    # What cleaning removed is counted once, with the first piece.
    dropped = [cleaned.dropped] + [collections.Counter()] * (len(pieces) - 1)
    return _paused([_encoded(text, p.text, d, tokenizer, tag, name)
                    for p, d in zip(pieces, dropped, strict=True)], pieces)  # fmt: skip


def row_pieces(ids: Sequence[int], tokenizer: Tokenizer, *, max_symbols: int) -> list[Encoded]:
    """An encoded text (a cache's row) cut as `text_pieces` cuts a text: its symbols
    decoded, cut by `split_text`, each piece encoded again with the row's language token.

    Args:
        ids: token ids of the text (the language token first in a multilingual run),
            ending `<eos>`.
        max_symbols: the longest piece; 0, or a row that fits: one piece, the row's ids.
    """
    text = tokenizer.decode(ids)
    pieces = split_text(text, max_chars=max_symbols)
    if len(pieces) == 1:
        return [Encoded([int(i) for i in ids], text, {})]
    head = [int(ids[0])] if tokenizer.language_tokens else []
    encoded = []
    for piece in pieces:
        piece_ids, _ = tokenizer.encode(piece.text)  # every character is a symbol of the row's
        encoded.append(Encoded(head + piece_ids[len(head) :], piece.text, {}))
    return _paused(encoded, pieces)


def _paused(encoded: list[Encoded], pieces: Sequence[Piece]) -> list[Encoded]:
    """Each piece's encoding with the pause after it (`Piece.pause_seconds`), none after
    the last."""
    pauses = [p.pause_seconds for p in pieces[:-1]] + [0.0]
    return [dataclasses.replace(e, pause=pause) for e, pause in zip(encoded, pauses, strict=True)]


def _encoded(text: str, cleaned: str, dropped: collections.Counter[str], tokenizer: Tokenizer,
             tag: str, name: str) -> Encoded:  # fmt: skip
    """`cleaned` (normalised `text`, or a piece of it) encoded, with what was left out."""
    ids, oov = tokenizer.encode(cleaned, language=tag)
    if len(ids) <= (2 if tokenizer.language_tokens else 1):  # eos (and a language id) alone
        raise TextError(
            f"{name} {text!r} has no symbols of the tokenizer ({tokenizer.symbols!r}) after "
            f"normalisation (it became {cleaned!r}); write it in the corpus's script"
        )
    if not any(char.isalnum() for char in tokenizer.decode(ids)):
        raise TextError(
            f"{name} {text!r} has nothing to say: only punctuation and spaces after "
            f"normalisation (it became {cleaned!r}); give it words"
        )
    return Encoded(ids, tokenizer.decode(ids), dict(dropped + oov))
