"""Cleaners for any script: what a transcript becomes before tokenising, and what it lost.

Every step that removes a character counts it, so `prepare` can report what cleaning
dropped (never silently) and skip a row that lost too many of its letters.

Steps of the "full" cleaner (the "basic" one skips 6 and 7):
1. control, format and unassigned characters dropped (whitespace ones become spaces),
   except the ZERO WIDTH NON-JOINER where the language writes with it (Persian);
2. Unicode NFKC (fullwidth forms, Arabic presentation forms, ligatures);
3. punctuation in ASCII: curly quotes, «», dashes, "…", Arabic ، ؛ ؟, CJK 。、「」;
   Persian and Arabic-Indic digits and separators (۲۵٪ → 25%); tatweel removed;
4. the language's letter unification (Persian: Arabic ي ك ى → ی ک ی);
5. ASCII folding where configured (English by default: "é" → "e", other scripts dropped);
6. English abbreviations; numbers in the row's language (`_numbers`); English spoken
   symbols ("&" → "and");
7. anything that is not a letter, mark, digit, kept punctuation or space is dropped;
8. lower-casing (a no-op in scripts without case).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
import unicodedata

from xtts_data._numbers import CURRENCY_SIGNS, NUMBER_LANGUAGES, expand_numbers

__all__ = [
    "KEPT_PUNCTUATION",
    "LANGUAGES",
    "Cleaned",
    "canonical_language",
    "clean",
    "collapse_whitespace",
    "espeak_voice",
    "is_known_language",
]

KEPT_PUNCTUATION = " !\"'(),-.:;?"
ZWNJ = "\u200c"
# Languages whose cleaners are known: every language `_numbers` reads.
LANGUAGES = NUMBER_LANGUAGES
_TAG_RE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8})*$")
# espeak-ng voices whose name is not the bare language code
_ESPEAK_VOICES = {"en": "en-us", "zh": "cmn"}
_ZWNJ_LANGUAGES = frozenset({"fa", "ur", "ps", "ku", "tg"})

_PUNCT_MAP = str.maketrans(
    {
        **dict.fromkeys("‘’‚‛′`´", "'"),
        **dict.fromkeys("“”„‟″«»「」『』《》", '"'),
        **dict.fromkeys("‐‑‒–—―−", "-"),
        "…": "...",
        "،": ",",  # Arabic comma
        "؛": ";",  # Arabic semicolon
        "؟": "?",  # Arabic question mark
        "。": ".",
        "、": ",",
        "٪": "%",  # Arabic percent sign
        "٫": ".",  # Arabic decimal separator
        "٬": ",",  # Arabic thousands separator
        **{chr(0x06F0 + i): str(i) for i in range(10)},  # Persian digits
        **{chr(0x0660 + i): str(i) for i in range(10)},  # Arabic-Indic digits
    }
)
_LETTER_MAPS = {"fa": str.maketrans({"ي": "ی", "ى": "ی", "ك": "ک"})}
_TATWEEL = "\u0640"
# Letters without a decomposition into ASCII (NFKD leaves them whole).
_ASCII_LETTERS = str.maketrans(
    {"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O", "ł": "l"}
    | {"Ł": "L", "đ": "d", "Đ": "D", "þ": "th", "Þ": "Th", "ð": "d", "Ð": "D", "ı": "i"}
)
# English symbols left after number expansion: spoken ones become words, the rest a space.
_BRACKETS = str.maketrans({"[": "(", "{": "(", "]": ")", "}": ")"})
_SPOKEN_MAP = _BRACKETS | str.maketrans(
    {"&": " and ", "@": " at ", "%": " percent ", "+": " plus ", "=": " equals "}
    | {"#": " number ", "$": " dollars ", "£": " pounds ", "€": " euros ", "¥": " yen "}
)
ABBREVIATIONS = {
    "mrs": "misess", "mr": "mister", "dr": "doctor", "st": "saint", "co": "company",
    "jr": "junior", "maj": "major", "gen": "general", "drs": "doctors", "rev": "reverend",
    "lt": "lieutenant", "hon": "honorable", "sgt": "sergeant", "capt": "captain",
    "esq": "esquire", "ltd": "limited", "col": "colonel", "ft": "fort",
}  # fmt: skip
_ABBREVIATION_RE = re.compile(
    r"\b(" + "|".join(ABBREVIATIONS) + r")\.(?P<end>\s*$)?", re.IGNORECASE
)
_WHITESPACE_RE = re.compile(r"\s+")
_STRAY_ZWNJ_RE = re.compile(r"(?<![^\W\d_])\u200c|\u200c(?![^\W\d_])")
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


@dataclasses.dataclass(frozen=True)
class Cleaned:
    """A cleaned transcript and what cleaning removed from it.

    Attributes:
        text: the cleaned text.
        dropped: characters removed (not mapped to another form), with their counts.
        letters: letters of the input (after NFKC), the base of the lost-letter share.
    """

    text: str
    dropped: collections.Counter[str]
    letters: int

    @property
    def lost_letters(self) -> float:
        """Share of the input's letters that cleaning removed (0 when it had none)."""
        lost = sum(n for c, n in self.dropped.items() if c.isalpha() and c != _TATWEEL)
        return lost / self.letters if self.letters else 0.0


def canonical_language(tag: str) -> str:
    """A BCP-47 tag in the form this package compares: lower case, "-" separated."""
    return tag.strip().replace("_", "-").lower()


def is_known_language(tag: str) -> bool:
    """`tag` is well formed and its primary language has cleaners here."""
    return bool(_TAG_RE.match(tag)) and tag.split("-")[0] in LANGUAGES


def espeak_voice(tag: str) -> str:
    """The espeak-ng voice of a language tag: "en" → "en-us", "zh" → "cmn", "en-gb" → "en-gb"."""
    return _ESPEAK_VOICES.get(tag, tag)


# Per-character decisions, cached: a corpus has few distinct characters, many rows.
@functools.lru_cache(maxsize=8192)
def _control(c: str, keep: str) -> str:
    """ " " for whitespace, "" for a control/format/unassigned character, else `c`."""
    if c.isspace():
        return " "
    return c if c in keep or unicodedata.category(c) not in _DROPPED_CATEGORIES else ""


@functools.lru_cache(maxsize=8192)
def _folded(c: str, keep: str) -> str:
    """`c` without accents, spelled in ASCII, or "" when it has no ASCII form."""
    if c.isascii() or c in keep:
        return c
    return "".join(f for f in unicodedata.normalize("NFKD", c.translate(_ASCII_LETTERS))
                   if f.isascii() or f in keep)  # fmt: skip


@functools.lru_cache(maxsize=8192)
def _speakable(c: str, keep: str) -> bool:
    category = unicodedata.category(c)
    return c.isalpha() or c in keep or category[0] == "M" or category == "Nd"


def _count_removed(text: str, removed, dropped: collections.Counter) -> None:
    dropped.update(c for c in text if removed(c))


def _strip_controls(text: str, keep: str, dropped: collections.Counter) -> str:
    out = "".join([_control(c, keep) for c in text])
    if len(out) < len(text):
        _count_removed(text, lambda c: not _control(c, keep), dropped)
    return out


def _fold_ascii(text: str, keep: str, dropped: collections.Counter) -> str:
    """Accents stripped, ASCII-less letters spelled out, anything else not in `keep` dropped."""
    if text.isascii():
        return text
    _count_removed(text, lambda c: not c.isspace() and not _folded(c, keep), dropped)
    return "".join([_folded(c, keep) for c in text])


def _keep_speakable(text: str, keep: str, dropped: collections.Counter) -> str:
    """Letters, marks, digits, kept punctuation and spaces; anything else becomes a space."""
    out = "".join([c if _speakable(c, keep) else " " for c in text])
    if out != text:
        _count_removed(text, lambda c: not _speakable(c, keep), dropped)
    return out


def _expand_abbreviation(match: re.Match[str]) -> str:
    word = ABBREVIATIONS[match.group(1).lower()]
    if match.group(1)[0].isupper():
        word = word.capitalize()
    # At the very end the period also closes the sentence: keep it.
    return word + ("." if match["end"] is not None else "")


def _meaningful_zwnj(text: str, dropped: collections.Counter) -> str:
    """ZWNJ only between two letters (where it shapes the word); stray ones dropped."""
    kept = _STRAY_ZWNJ_RE.sub("", re.sub("\u200c+", ZWNJ, text))
    dropped[ZWNJ] += len(text) - len(kept)
    return kept


def collapse_whitespace(text: str) -> str:
    return _WHITESPACE_RE.sub(" ", text).strip()


def clean(text: str, *, language: str, full: bool, fold: bool, lowercase: bool) -> Cleaned:
    """Clean `text` as written in `language` (a canonical tag with known cleaners).

    Args:
        text: a raw transcript.
        language: the row's language, e.g. "fa" or "en-gb".
        full: numbers, abbreviations and symbols expanded, unspeakable characters dropped
            ("full" cleaners); otherwise only steps 1–6 ("basic").
        fold: fold to ASCII (step 5).
        lowercase: lower-case (step 6).
    """
    primary = language.split("-")[0]
    dropped: collections.Counter[str] = collections.Counter()
    zwnj = ZWNJ if primary in _ZWNJ_LANGUAGES else ""
    text = unicodedata.normalize("NFKC", _strip_controls(text, zwnj, dropped))
    dropped[_TATWEEL] += text.count(_TATWEEL)  # an elongation, not a letter
    letters = sum(map(str.isalpha, text)) - dropped[_TATWEEL]
    text = text.replace(_TATWEEL, "").translate(_PUNCT_MAP)
    text = text.translate(_LETTER_MAPS.get(primary, {}))
    if fold:
        text = _fold_ascii(text, CURRENCY_SIGNS if full else "", dropped)
    if full:
        if primary == "en":
            text = _ABBREVIATION_RE.sub(_expand_abbreviation, text)
        text = expand_numbers(text, language)
        text = text.translate(_SPOKEN_MAP if primary == "en" else _BRACKETS)
        text = _keep_speakable(text, KEPT_PUNCTUATION + zwnj, dropped)
    if zwnj:
        text = _meaningful_zwnj(text, dropped)
    text = text.lower() if lowercase else text  # after the expansions: "Prozent" too
    dropped = +dropped  # zero counts out
    return Cleaned(collapse_whitespace(text), dropped, letters)
