"""Numbers as words in the row's language: cardinals, ordinals, years, decimals, percent, money.

`num2words` does the reading. What it cannot do is written here, each with its reason:
- English is spoken in Keith Ito's tacotron `english_cleaners` style ("twenty one", no
  "and", no commas), so its words are num2words' with those removed.
- English plurals ("1980s"), ordinal suffixes ("22nd") and money: num2words has no plural,
  reads an int amount as cents, says "zero dollars, one cent" and "pounds sterling", and
  knows no yen.
- Digit-by-digit reading (zero-led "007", numbers beyond `MAX_CARDINAL`, which are ids or
  phone numbers rather than quantities): num2words has no such mode.
- Chinese: num2words 0.5 has no Chinese converter.
- Arabic decimals: num2words' Arabic decimal reading is garbled ("ثلاثة  , أربع عشرة").
- The percent word per language, and the written forms (separators) per language.
"""

from __future__ import annotations

import dataclasses
import decimal
import re

from num2words import CONVERTER_CLASSES, num2words

__all__ = [
    "CURRENCY_SIGNS",
    "MAX_CARDINAL",
    "NUMBER_LANGUAGES",
    "cardinal",
    "digits",
    "expand_numbers",
    "ordinal",
    "year",
]

MAX_CARDINAL = 10**15 - 1  # beyond "nine hundred ninety nine trillion ..." read digit by digit

# (singular, plural, subunit singular, subunit plural); no subunit: the fraction is read out
_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", None, None),
}
_CURRENCY_CODES = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
CURRENCY_SIGNS = "".join(_CURRENCIES)


@dataclasses.dataclass(frozen=True)
class _Style:
    """How one language writes and says numbers.

    Attributes:
        group: thousands separators ("1,000" / "1.000" / "1 000").
        point: decimal marks.
        percent: how "N%" is said, "{}" standing for N.
        spaced: words are separated by spaces (not in Chinese).
    """

    group: str = ","
    point: str = "."
    percent: str | None = None
    spaced: bool = True


_COMMA_DECIMAL = {"group": ". ", "point": ","}
_STYLES = {
    "en": _Style(percent="{} percent"),
    "fa": _Style(percent="{} درصد"),
    "ar": _Style(percent="{} بالمئة"),
    "he": _Style(percent="{} אחוז"),
    "de": _Style(**_COMMA_DECIMAL, percent="{} Prozent"),
    "nl": _Style(**_COMMA_DECIMAL, percent="{} procent"),
    "fr": _Style(**_COMMA_DECIMAL, percent="{} pour cent"),
    "es": _Style(**_COMMA_DECIMAL, percent="{} por ciento"),
    "it": _Style(**_COMMA_DECIMAL, percent="{} per cento"),
    "pt": _Style(**_COMMA_DECIMAL, percent="{} por cento"),
    "ru": _Style(**_COMMA_DECIMAL, percent="{} %ru"),  # plural form chosen by the number
    "uk": _Style(**_COMMA_DECIMAL, percent="{} %uk"),
    "pl": _Style(**_COMMA_DECIMAL, percent="{} procent"),
    "cs": _Style(**_COMMA_DECIMAL, percent="{} procent"),
    "sv": _Style(**_COMMA_DECIMAL, percent="{} procent"),
    "tr": _Style(**_COMMA_DECIMAL, percent="yüzde {}"),
    "zh": _Style(percent="百分之{}", spaced=False),
}
_SLAVIC_PERCENT = {
    "ru": ("процент", "процента", "процентов"),
    "uk": ("відсоток", "відсотки", "відсотків"),
}
# Languages whose numbers this module reads: num2words' and Chinese.
NUMBER_LANGUAGES = frozenset(code.split("_")[0] for code in CONVERTER_CLASSES) | {"zh"}


def _converter(language: str) -> str:
    """The num2words converter of a BCP-47 tag: "pt-br" → "pt_BR", "de-at" → "de"."""
    primary, _, region = language.partition("-")
    variant = f"{primary}_{region.upper()}"
    return variant if region and variant in CONVERTER_CLASSES else primary


def _english(words: str) -> str:
    """num2words' English in tacotron style: no "and", hyphens or commas."""
    return " ".join(re.sub(r",|-|\band\b", " ", words).split())


def _say(value, language: str, **kwargs) -> str:
    if _converter(language) == "zh":
        return _chinese(int(value))
    words = num2words(value, lang=_converter(language), **kwargs)
    return _english(words) if language.startswith("en") else " ".join(words.split())


def digits(text: str, language: str = "en") -> str:
    """Each digit of `text` as a word: "007" → "zero zero seven"."""
    sep = "" if not _style(language).spaced else " "
    return sep.join(_say(int(c), language) for c in text if c.isdigit())


def cardinal(n: int, language: str = "en") -> str:
    """`n` in words: 1234 → "one thousand two hundred thirty four", -3 → "minus three".

    Numbers beyond `MAX_CARDINAL` are read digit by digit.
    """
    if abs(n) > MAX_CARDINAL:
        return (_minus(language) if n < 0 else "") + digits(str(abs(n)), language)
    return _say(n, language)


def ordinal(n: int, language: str = "en") -> str:
    """`n` as an ordinal: 1 → "first", 22 → "twenty second", 103 → "one hundred third"."""
    if _converter(language) == "zh":
        return "第" + _chinese(n)
    return _say(n, language, to="ordinal")


def year(n: int, language: str = "en") -> str:
    """`n` read as a year where the language has a year reading (English "nineteen eighty
    four", German "neunzehnhundertvierundachtzig"); a cardinal elsewhere."""
    if _converter(language) == "zh":
        return digits(str(n), language) + "年"
    return _say(n, language, to="year")


def _style(language: str) -> _Style:
    return _STYLES.get(language.split("-")[0], _Style())


def _minus(language: str) -> str:
    """The word for a minus sign, with its separator: "minus ", "منفی ", "负"."""
    if _converter(language) == "zh":
        return "负"
    return _say(-1, language).split()[0] + " "


# --- Chinese (num2words has none) -------------------------------------------------------
_ZH_DIGITS = "零一二三四五六七八九"
_ZH_UNITS = ("", "十", "百", "千")
_ZH_GROUPS = ("", "万", "亿", "万亿")


def _chinese_group(n: int) -> str:
    """0 < n < 10000 in Chinese, zeros inside read once as 零 (1005 → 一千零五)."""
    out, zero = [], False
    for power in (3, 2, 1, 0):
        digit = n // 10**power % 10
        if digit == 0:
            zero = bool(out)
            continue
        if zero:
            out.append("零")
            zero = False
        out.append(_ZH_DIGITS[digit] + _ZH_UNITS[power])
    return "".join(out)


def _chinese(n: int) -> str:
    if n < 0:
        return "负" + _chinese(-n)
    if n == 0:
        return "零"
    groups, parts = [], []
    while n:
        n, group = divmod(n, 10000)
        groups.append(group)
    for index in range(len(groups) - 1, -1, -1):
        group = groups[index]
        if group == 0:
            continue
        if parts and group < 1000:
            parts.append("零")
        parts.append(_chinese_group(group) + _ZH_GROUPS[index])
    text = "".join(parts)
    return text[1:] if text.startswith("一十") else text  # 十五, not 一十五


# --- English: the tacotron reading, with num2words' words --------------------------------
def _plural(words: str) -> str:
    if words.endswith("y"):
        return words[:-1] + "ies"
    if words.endswith("x"):
        return words + "es"
    return words + "s"


def _integer(text: str, language: str = "en") -> str:
    """An integer as written: a standalone 4-digit year, zero-led digits, or a cardinal."""
    plain = re.sub(r"\D", "", text)
    if len(plain) > 1 and plain.startswith("0"):
        return digits(plain, language)
    is_year = len(text) == 4 and text.isdigit() and 1000 <= int(text) <= 2999
    if is_year and _converter(language) != "zh":
        return year(int(text), language)
    return cardinal(int(plain), language)


def _decimal(whole: str, frac: str, language: str = "en") -> str:
    if language.startswith("en") or _converter(language) in ("ar", "zh"):
        point = {"ar": "فاصلة", "zh": "点"}.get(_converter(language), "point")
        sep = " " if _style(language).spaced else ""
        return sep.join([_integer(whole, language), point, digits(frac, language)])
    value = decimal.Decimal(f"{re.sub(r'[^0-9]', '', whole)}.{frac}")
    return _say(value, language)


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


_ENGLISH_RE = re.compile(
    r"(?P<sign>(?<![\w.,])-(?=[$€£¥]?\d))?"
    r"(?P<cur>[$€£¥](?=\d))?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
    r"(?:\.(?P<frac>\d+))?"
    r"(?P<suffix>%|(?:st|nd|rd|th|'?s)\b)?"
    r"(?:\s(?P<scale>thousand|million|billion|trillion)\b)?",
    re.IGNORECASE,
)
_LEADING_POINT_RE = re.compile(r"(?<![\w.])\.(?=\d)")  # ".5": a decimal without its zero


def _english_words(match: re.Match[str]) -> str:
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


# --- Any other language -------------------------------------------------------------------
def _number_re(style: _Style) -> re.Pattern[str]:
    group, point = (re.escape(chars) for chars in (style.group, style.point))
    return re.compile(
        rf"(?P<sign>(?<![\w.,])-(?=[$€£¥]?\d))?"
        rf"(?P<cur>[$€£¥](?=\d))?"
        rf"(?P<int>\d{{1,3}}(?:[{group}]\d{{3}})+(?!\d)|\d+)"
        rf"(?:[{point}](?P<frac>\d+))?"
        rf"(?P<suffix>\s?%)?"  # "12 %", as French, German and Russian write it
        rf"(?:\s?(?P<cur_after>[$€£¥])(?!\d))?"  # "3,50 €", as German and French write it
    )


def _currency(language: str, sign: str, whole: str, frac: str | None) -> str | None:
    """Money in words where num2words knows the language's forms of the currency."""
    code, converter = _CURRENCY_CODES[sign], _converter(language)
    if code not in getattr(CONVERTER_CLASSES[converter], "CURRENCY_FORMS", {}):
        return None
    amount = decimal.Decimal(whole + (f".{frac}" if frac else ""))
    whole_amount = not frac or int(frac) == 0
    try:  # a whole amount: the units only ("|" marks where num2words starts the subunits)
        words = num2words(amount, lang=converter, to="currency", currency=code,
                          **({"separator": "|"} if whole_amount else {}))  # fmt: skip
    except NotImplementedError:
        return None
    return " ".join(words.partition("|")[0].split())


def _percent(language: str, words: str, value: str) -> str:
    template = _style(language).percent
    if template is None:
        return words + " %"  # no word known: the sign stays, and is reported if dropped
    primary = language.split("-")[0]
    if primary in _SLAVIC_PERCENT:
        forms = _SLAVIC_PERCENT[primary]
        n = int(value) if value.isdigit() else 5  # decimals take the genitive singular
        word = forms[1] if not value.isdigit() else _slavic_plural(n, forms)
        return template.format(words).replace(f"%{primary}", word)
    return template.format(words)


def _slavic_plural(n: int, forms: tuple[str, str, str]) -> str:
    if n % 10 == 1 and n % 100 != 11:
        return forms[0]
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return forms[1]
    return forms[2]


def _words_in(language: str, match: re.Match[str]) -> str:
    whole, frac = match["int"], match["frac"]
    plain = re.sub(r"\D", "", whole)
    minus = _minus(language) if match["sign"] else ""
    sign = match["cur"] or (match["cur_after"] if not match["suffix"] else None)
    if sign:
        money = _currency(language, sign, plain, frac)
        if money is not None:
            return minus + money
    if frac is not None:
        words = _decimal(whole, frac, language)
    elif _converter(language) == "zh" and match.string[match.end() : match.end() + 1] == "年":
        words = digits(plain, language)  # 一九八四年: years are read digit by digit
    else:
        words = _integer(whole, language)
    if match["suffix"]:
        words = _percent(language, words, plain if frac is None else f"{plain}.{frac}")
    if match["cur"] or match["cur_after"]:  # no words for this currency: the sign stays
        words += " " + (match["cur"] or match["cur_after"])  # (and is reported if dropped)
    return minus + words


def expand_numbers(text: str, language: str = "en") -> str:
    """Every number in `text` spelled out in words of `language` (a BCP-47 tag).

    English: "$5.50" → "five dollars, fifty cents", "1,000,000" → "one million", "3.14" →
    "three point one four", "1984" → "nineteen eighty four", "22nd" → "twenty second",
    "50%" → "fifty percent", "-3" → "minus three", "1980s" → "nineteen eighties".
    Persian: "25%" → "بیست و پنج درصد". German: "3,5" → "drei Komma fünf".
    Digits must be ASCII (the cleaners map Persian and Arabic-Indic digits first).
    """
    style = _style(language)
    if language.startswith("en"):
        pattern, say = _ENGLISH_RE, _english_words
        text = _LEADING_POINT_RE.sub("0.", text)
    else:
        pattern, say = _number_re(style), lambda m: _words_in(language, m)

    def spaced(match: re.Match[str]) -> str:
        """The words, with a space where they would touch a letter ("mp3")."""
        whole, start, end = match.string, match.start(), match.end()
        pad = " " if style.spaced else ""
        before = pad if start > 0 and whole[start - 1].isalpha() else ""
        after = pad if end < len(whole) and whole[end].isalpha() else ""
        return before + say(match) + after

    return pattern.sub(spaced, text)
