"""English numbers as words: cardinals, ordinals, years, decimals, money and percentages.

Follows Keith Ito's tacotron `english_cleaners` (no "and", no hyphens: "twenty one"), without
its `inflect` dependency and with three fixes: decimals are read digit by digit ("three point
one four"), "$2.5" is fifty cents rather than five, and numbers too long to read as a
cardinal are read digit by digit instead of failing.
"""

from __future__ import annotations

import re

__all__ = [
    "CURRENCY_SIGNS",
    "MAX_CARDINAL",
    "cardinal",
    "digits",
    "expand_numbers",
    "ordinal",
    "year",
]

# fmt: off
_ONES = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)
# fmt: on
_TENS = ("_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (10**3, "thousand"))
MAX_CARDINAL = 10**15 - 1  # beyond "nine hundred ninety nine trillion ..." read digit by digit

_IRREGULAR_ORDINALS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}

# (singular, plural, subunit singular, subunit plural); no subunit: the fraction is read out
_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", None, None),
}
CURRENCY_SIGNS = "".join(_CURRENCIES)

_NUMBER_RE = re.compile(
    r"(?P<sign>(?<![\w.,])-(?=[$€£¥]?\d))?"
    r"(?P<cur>[$€£¥](?=\d))?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
    r"(?:\.(?P<frac>\d+))?"
    r"(?P<suffix>%|(?:st|nd|rd|th|'?s)\b)?"
    r"(?:\s(?P<scale>thousand|million|billion|trillion)\b)?",
    re.IGNORECASE,
)
_LEADING_POINT_RE = re.compile(r"(?<![\w.])\.(?=\d)")  # ".5": a decimal without its zero


def digits(text: str) -> str:
    """Each digit of `text` as a word: "007" → "zero zero seven"."""
    return " ".join(_ONES[int(c)] for c in text if c.isdigit())


def _below_thousand(n: int) -> list[str]:
    words = []
    if n >= 100:
        words += [_ONES[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        words.append(_TENS[n // 10])
        n %= 10
        if n:
            words.append(_ONES[n])
    elif n or not words:
        words.append(_ONES[n])
    return words


def cardinal(n: int) -> str:
    """`n` in words: 1234 → "one thousand two hundred thirty four", -3 → "minus three".

    Numbers beyond `MAX_CARDINAL` are read digit by digit.
    """
    if n < 0:
        return "minus " + cardinal(-n)
    if n > MAX_CARDINAL:
        return digits(str(n))
    words: list[str] = []
    for value, name in _SCALES:
        if n >= value:
            words += [*_below_thousand(n // value), name]
            n %= value
    if n or not words:
        words += _below_thousand(n)
    return " ".join(words)


def ordinal(n: int) -> str:
    """`n` as an ordinal: 1 → "first", 22 → "twenty second", 103 → "one hundred third"."""
    head, _, last = cardinal(n).rpartition(" ")
    if last in _IRREGULAR_ORDINALS:
        last = _IRREGULAR_ORDINALS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head} {last}" if head else last


def year(n: int) -> str:
    """`n` read as a year: 1984 → "nineteen eighty four", 1900 → "nineteen hundred",
    2005 → "two thousand five", 2000 → "two thousand"; outside 1000–2999 a cardinal."""
    if not 1000 <= n <= 2999 or n % 1000 == 0:
        return cardinal(n)
    if 2000 < n < 2010:
        return "two thousand " + _ONES[n % 10]
    high, low = divmod(n, 100)
    if low == 0:
        return cardinal(high) + " hundred"
    if low < 10:
        return f"{cardinal(high)} oh {_ONES[low]}"
    return f"{cardinal(high)} {cardinal(low)}"


def _plural(words: str) -> str:
    if words.endswith("y"):
        return words[:-1] + "ies"
    if words.endswith("x"):
        return words + "es"
    return words + "s"


def _integer(text: str) -> str:
    """An integer as written: a standalone 4-digit year, zero-led digits, or a cardinal."""
    if len(text) > 1 and text.startswith("0"):
        return digits(text)
    if len(text) == 4 and text.isdigit():
        return year(int(text))
    return cardinal(int(text.replace(",", "")))


def _decimal(whole: str, frac: str) -> str:
    return f"{_integer(whole)} point {digits(frac)}"


def _money(cur: str, whole: str, frac: str | None, scale: str | None) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[cur]
    units = cardinal(int(whole.replace(",", "")))
    if scale or (frac is not None and (sub_one is None or len(frac) > 2)):
        amount = _decimal(whole, frac) if frac is not None else units
        return f"{amount} {scale} {many}" if scale else f"{amount} {many}"
    cents = int(frac.ljust(2, "0")) if frac else 0
    parts = []
    if units != "zero" or not cents:
        parts.append(f"{units} {one if units == 'one' else many}")
    if cents:
        parts.append(f"{cardinal(cents)} {sub_one if cents == 1 else sub_many}")
    return ", ".join(parts)


def _number_words(match: re.Match[str]) -> str:
    whole, frac, suffix, scale = match.group("int", "frac", "suffix", "scale")
    suffix = (suffix or "").lower()
    if match["cur"]:
        words = _money(match["cur"], whole, frac, scale)
        scale = None
        words += f" {suffix}" if suffix else ""
    elif frac is not None:
        words = _decimal(whole, frac) + (" percent" if suffix == "%" else f" {suffix}")
    elif suffix == "%":
        words = _integer(whole) + " percent"
    elif suffix in ("st", "nd", "rd", "th"):
        words = ordinal(int(whole.replace(",", "")))
    elif suffix in ("s", "'s"):
        words = _plural(_integer(whole))
    else:
        words = _integer(whole)
    words = ("minus " if match["sign"] else "") + words.strip()
    return words + (f" {scale}" if scale else "")


def _spaced(match: re.Match[str]) -> str:
    """The words for `match`, with a space where they would touch a letter ("mp3")."""
    text, start, end = match.string, match.start(), match.end()
    before = " " if start > 0 and text[start - 1].isalpha() else ""
    after = " " if end < len(text) and text[end].isalpha() else ""
    return before + _number_words(match) + after


def expand_numbers(text: str) -> str:
    """Every number in `text` spelled out in English words.

    "$5.50" → "five dollars, fifty cents", "1,000,000" → "one million", "3.14" → "three
    point one four", "1984" → "nineteen eighty four", "22nd" → "twenty second", "50%" →
    "fifty percent", "-3" → "minus three", "1980s" → "nineteen eighties".
    """
    text = _LEADING_POINT_RE.sub("0.", text)
    return _NUMBER_RE.sub(_spaced, text)
