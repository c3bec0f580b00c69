"""Text front end: `TextConfig`, `normalize_text` and the character/phoneme `Tokenizer`.

Training and inference share this one path: raw text → `normalize_text` → `Tokenizer.encode`.
The english cleaner follows Keith Ito's tacotron `english_cleaners` (see `_numbers`).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
import string
import threading
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from xtts_data._numbers import CURRENCY_SIGNS, expand_numbers
from xtts_data.errors import ConfigError

__all__ = [
    "DEFAULT_SYMBOLS",
    "IPA_SYMBOLS",
    "TextConfig",
    "Tokenizer",
    "normalize_text",
    "text_to_ids",
]

Cleaners = Literal["english", "basic", "none"]
_CLEANERS = ("english", "basic", "none")

_PUNCTUATION = " !\"'(),-.:;?"
DEFAULT_SYMBOLS = _PUNCTUATION + string.ascii_lowercase
_IPA_GROUPS = (
    "iyɨʉɯuɪʏʊeøɘəɵɤoɛœɜɞʌɔæɐaɶɑɒᵻɚ",  # vowels
    "pbtdʈɖcɟkgɡqɢʔɴŋɲɳnɱmʙrʀⱱɾɽɸβfvθðszʃʒʂʐçʝxɣχʁħʕhɦɬɮʋɹɻjɰlɭʎʟɫ",  # pulmonic consonants
    "ʘɓǀɗǃʄǂɠǁʛ",  # non-pulmonic consonants
    "ʍwɥʜʢʡɕʑɺɧ",  # other consonants
    "ˈˌːˑʲ˞\u0329",  # stress, length, palatalisation, rhoticity, syllabic
)
IPA_SYMBOLS = _PUNCTUATION + "".join(_IPA_GROUPS)

_PAD, _EOS = "<pad>", "<eos>"
_PHONEMES_HINT = (
    'pip install "xtts-data[phonemes]" and install espeak-ng (e.g. apt-get install espeak-ng)'
)

# Punctuation that NFKC leaves alone but the symbol sets spell in ASCII.
_PUNCT_MAP = str.maketrans(
    {
        **dict.fromkeys("‘’‚‛′`´", "'"),
        **dict.fromkeys("“”„‟″«»", '"'),
        **dict.fromkeys("‐‑‒–—―−", "-"),
        "…": "...",
    }
)
# Letters without a decomposition into ASCII (NFKD leaves them whole).
_LETTER_MAP = str.maketrans(
    {"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O", "ł": "l"}
    | {"Ł": "L", "đ": "d", "Đ": "D", "þ": "th", "Þ": "Th", "ð": "d", "Ð": "D", "ı": "i"}
)
# Symbols left after number expansion: spoken ones become words, the rest a space.
_SPOKEN_MAP = str.maketrans(
    {"&": " and ", "@": " at ", "%": " percent ", "+": " plus ", "=": " equals "}
    | {"#": " number ", "$": " dollars ", "£": " pounds ", "€": " euros ", "¥": " yen "}
    | {"[": "(", "{": "(", "]": ")", "}": ")"}
    | dict.fromkeys("*/\\^_|~<>", " ")
)
_ABBREVIATIONS = {
    "mrs": "misess",
    "mr": "mister",
    "dr": "doctor",
    "st": "saint",
    "co": "company",
    "jr": "junior",
    "maj": "major",
    "gen": "general",
    "drs": "doctors",
    "rev": "reverend",
    "lt": "lieutenant",
    "hon": "honorable",
    "sgt": "sergeant",
    "capt": "captain",
    "esq": "esquire",
    "ltd": "limited",
    "col": "colonel",
    "ft": "fort",
}
_ABBREVIATION_RE = re.compile(
    r"\b(" + "|".join(_ABBREVIATIONS) + r")\.(?P<end>\s*$)?", re.IGNORECASE
)
_WHITESPACE_RE = re.compile(r"\s+")
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


def _fail(field: str, value: Any, expected: str) -> None:
    raise ConfigError(f"TextConfig.{field}: expected {expected}, received: {field}={value!r}")


def _check_symbols(owner: str, symbols: Any) -> None:
    """Symbols must be a non-empty string of distinct characters (their order is the ids)."""
    if not isinstance(symbols, str) or not symbols:
        raise ConfigError(
            f"{owner}.symbols: expected a non-empty str, received: symbols={symbols!r}"
        )
    counts = collections.Counter(symbols)
    repeated = "".join(c for c, n in counts.items() if n > 1)
    if repeated:
        raise ConfigError(
            f"{owner}.symbols: expected distinct characters, received: repeated={repeated!r}"
        )


def _import_phonemizer():
    """The `phonemizer` module, or a ConfigError that says how to install it."""
    try:
        import phonemizer  # optional extra: only phoneme configs need it
    except ImportError as err:
        raise ConfigError(
            "TextConfig.phonemes: expected the `phonemizer` package to be importable, "
            f"received: phonemes=True ({err}); to fix: {_PHONEMES_HINT}"
        ) from err
    return phonemizer


@dataclasses.dataclass(frozen=True, kw_only=True)
class TextConfig:
    """How raw transcripts become model input text.

    Attributes:
        cleaners: `"english"`: Unicode NFKC, ASCII folding, lower-casing, abbreviations
            ("dr." → "doctor"), numbers, money and percentages as words, spoken symbols
            ("&" → "and"), whitespace clean-up. `"basic"`: the same without the English
            expansions. `"none"`: the text as given, only stripped (`lowercase` and
            `ascii_fold` do not apply).
        lowercase: lower-case the text (english/basic).
        ascii_fold: strip accents ("é" → "e") and drop characters with no ASCII form
            (emoji, other scripts) (english/basic). Quotes, dashes and "…" are always
            written in ASCII by english/basic.
        phonemes: after cleaning, convert to IPA with `phonemizer`'s espeak backend
            (optional extra: `pip install "xtts-data[phonemes]"` plus espeak-ng).
        language: espeak language of the phonemizer, e.g. `"en-us"`.
        symbols: the vocabulary, one character per symbol, ids in string order; `None`
            picks `IPA_SYMBOLS` with phonemes, else `DEFAULT_SYMBOLS` (plus A–Z when the
            cleaned text keeps capitals). See `effective_symbols`.
    """

    cleaners: Cleaners = "english"
    lowercase: bool = True
    ascii_fold: bool = True
    phonemes: bool = False
    language: str = "en-us"
    symbols: str | None = None

    def __post_init__(self) -> None:
        if self.cleaners not in _CLEANERS:
            _fail("cleaners", self.cleaners, f"one of {_CLEANERS}")
        for name in ("lowercase", "ascii_fold", "phonemes"):
            if not isinstance(getattr(self, name), bool):
                _fail(name, getattr(self, name), "a bool")
        if not isinstance(self.language, str) or not self.language.strip():
            _fail("language", self.language, "a non-empty espeak language code such as 'en-us'")
        if self.symbols is not None:
            _check_symbols("TextConfig", self.symbols)
        if self.phonemes:
            _import_phonemizer()

    @property
    def effective_symbols(self) -> str:
        """`symbols`, or the default set for these cleaners/phoneme settings when `None`."""
        if self.symbols is not None:
            return self.symbols
        if self.phonemes:
            return IPA_SYMBOLS
        keeps_capitals = self.cleaners == "none" or not self.lowercase
        return DEFAULT_SYMBOLS + (string.ascii_uppercase if keeps_capitals else "")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TextConfig:
        """Build from a mapping (e.g. a YAML `text:` section).

        Raises:
            ConfigError: unknown keys (named in the message) or an invalid value.
        """
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(f"TextConfig: unknown field(s) {unknown}; known: {known}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """All fields as given (`symbols` may be `None`): round-trips `from_dict`."""
        return dataclasses.asdict(self)


def _strip_controls(text: str) -> str:
    """Drop control/format/unassigned characters; whitespace controls become spaces."""
    return "".join(
        " " if c.isspace() else c
        for c in text
        if c.isspace() or unicodedata.category(c) not in _DROPPED_CATEGORIES
    )


def _fold_ascii(text: str, keep: str) -> str:
    """Accents stripped, ASCII-less letters spelled out, anything else not in `keep` dropped."""
    text = unicodedata.normalize("NFKD", text.translate(_LETTER_MAP))
    return "".join(c for c in text if c.isascii() or c in keep)


def _collapse_whitespace(text: str) -> str:
    return _WHITESPACE_RE.sub(" ", text).strip()


def _expand_abbreviation(match: re.Match[str]) -> str:
    word = _ABBREVIATIONS[match.group(1).lower()]
    if match.group(1)[0].isupper():
        word = word.capitalize()
    # At the very end the period also closes the sentence: keep it.
    return word + ("." if match["end"] is not None else "")


def _clean(text: str, config: TextConfig, *, keep: str = "") -> str:
    """The shared english/basic steps: NFKC, ASCII punctuation, folding, lower-casing."""
    text = unicodedata.normalize("NFKC", _strip_controls(text)).translate(_PUNCT_MAP)
    if config.ascii_fold:
        text = _fold_ascii(text, keep)
    return text.lower() if config.lowercase else text


def _clean_english(text: str, config: TextConfig) -> str:
    text = _clean(text, config, keep=CURRENCY_SIGNS)
    text = _ABBREVIATION_RE.sub(_expand_abbreviation, text)
    text = expand_numbers(text).translate(_SPOKEN_MAP)
    return _collapse_whitespace(text)


# espeak-ng is one C library with global state: phonemizing from `prepare`'s reader
# threads at once interleaves their outputs ("number of lines in input and output must be
# equal"), so calls take turns.
_ESPEAK_LOCK = threading.Lock()
# phonemizer warns on every line whose word count changes (e.g. "1776" -> four words);
# the cleaned text is what the tokenizer reports, so those warnings are noise.
_PHONEMIZER_LOG = logging.getLogger("xtts_data.phonemizer")
_PHONEMIZER_LOG.setLevel(logging.ERROR)


def _phonemize(text: str, language: str) -> str:
    """IPA for `text` from espeak, punctuation kept, stress marked."""
    phonemizer = _import_phonemizer()
    if not text:
        return text
    try:
        with _ESPEAK_LOCK:
            ipa = phonemizer.phonemize(
                text,
                language=language,
                backend="espeak",
                strip=True,
                preserve_punctuation=True,
                with_stress=True,
                logger=_PHONEMIZER_LOG,
            )
    except RuntimeError as err:  # espeak-ng missing, or it does not know `language`
        raise ConfigError(
            f"TextConfig.language: expected a language espeak can phonemize, received: "
            f"language={language!r} ({err}); to fix: {_PHONEMES_HINT}"
        ) from err
    return _collapse_whitespace(ipa)


def normalize_text(text: str, config: TextConfig) -> str:
    """Clean `text` with `config.cleaners`, then convert to IPA when `config.phonemes`.

    Never raises for a `str` with the english/basic/none cleaners (odd characters are
    dropped, numbers too long to say are read digit by digit).

    Args:
        text: a raw transcript.
        config: the text settings.

    Returns:
        The text the tokenizer encodes; empty if nothing speakable is left.

    Raises:
        TypeError: `text` is not a str.
        ConfigError: phonemes are on and espeak cannot phonemize (not installed, unknown
            language).
    """
    if not isinstance(text, str):
        raise TypeError(f"normalize_text: expected text of type str, received: {type(text)}")
    if config.cleaners == "english":
        text = _clean_english(text, config)
    elif config.cleaners == "basic":
        text = _collapse_whitespace(_clean(text, config))
    else:
        text = text.strip()
    return _phonemize(text, config.language) if config.phonemes else text


class Tokenizer:
    """Characters ↔ integer ids: 0 is `<pad>`, 1 is `<eos>`, symbol `i` has id `i + 2`.

    Args:
        symbols: the vocabulary, distinct characters in id order.

    Raises:
        ConfigError: `symbols` is empty, not a str, or repeats a character.
    """

    PAD = 0
    EOS = 1

    def __init__(self, symbols: str) -> None:
        _check_symbols("Tokenizer", symbols)
        self._symbols = symbols
        self._ids = {c: i + 2 for i, c in enumerate(symbols)}

    @classmethod
    def from_config(cls, config: TextConfig) -> Tokenizer:
        """The tokenizer for `config.effective_symbols`."""
        return cls(config.effective_symbols)

    @property
    def symbols(self) -> str:
        """The vocabulary in id order (without the two reserved ids)."""
        return self._symbols

    @property
    def vocab_size(self) -> int:
        """Number of ids: `len(symbols) + 2` (pad and eos)."""
        return len(self._symbols) + 2

    def encode(
        self, text: str, *, add_eos: bool = True
    ) -> tuple[list[int], collections.Counter[str]]:
        """Ids of the characters of normalised `text`.

        Args:
            text: text already passed through `normalize_text`.
            add_eos: append `EOS`.

        Returns:
            `(ids, oov)`: the ids of in-vocabulary characters (others are dropped) and a
            Counter of the dropped characters.
        """
        ids: list[int] = []
        oov: collections.Counter[str] = collections.Counter()
        for char in text:
            if char in self._ids:
                ids.append(self._ids[char])
            else:
                oov[char] += 1
        if add_eos:
            ids.append(self.EOS)
        return ids, oov

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids` (ints or an int array), skipping pad and eos.

        Raises:
            ConfigError: an id outside `[0, vocab_size)`: the ids come from another
                vocabulary.
        """
        chars = []
        for raw in ids:
            index = int(raw)
            if not 0 <= index < self.vocab_size:
                raise ConfigError(
                    f"Tokenizer.decode: expected ids in [0, {self.vocab_size}), received: "
                    f"id={index} (ids made with another vocabulary?)"
                )
            if index >= 2:
                chars.append(self._symbols[index - 2])
        return "".join(chars)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: reserved tokens and symbols, round-trips `from_dict`."""
        return {"specials": [_PAD, _EOS], "symbols": self._symbols}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Tokenizer:
        """Rebuild from `to_dict` output.

        Raises:
            ConfigError: unknown or missing keys, other reserved tokens, invalid symbols.
        """
        keys = sorted(values)
        if keys != ["specials", "symbols"]:
            raise ConfigError(
                f"Tokenizer.from_dict: expected keys ['specials', 'symbols'], received: {keys}"
            )
        specials = list(values["specials"])
        if specials != [_PAD, _EOS]:
            raise ConfigError(
                f"Tokenizer.from_dict: expected specials {[_PAD, _EOS]}, received: "
                f"specials={specials!r}"
            )
        return cls(values["symbols"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and other._symbols == self._symbols

    def __hash__(self) -> int:
        return hash(self._symbols)

    def __repr__(self) -> str:
        return f"Tokenizer(symbols={self._symbols!r})"


def text_to_ids(
    text: str, config: TextConfig, tokenizer: Tokenizer
) -> tuple[list[int], str, collections.Counter[str]]:
    """Normalise `text` and encode it (with `EOS`).

    Returns:
        `(ids, normalised_text, oov)`, as `normalize_text` and `Tokenizer.encode` give them.
    """
    normalised = normalize_text(text, config)
    ids, oov = tokenizer.encode(normalised)
    return ids, normalised, oov
