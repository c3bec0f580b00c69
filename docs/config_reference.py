"""The configuration reference: one table per stack-config section, from the dataclasses.

Each package README's "Configuration" section holds the tables of the sections its package
owns, between `<!-- config-reference:SECTION -->` and `<!-- /config-reference:SECTION -->`:
every key, its default as YAML writes it, and its meaning (the first sentence of the
field's entry in the class docstring). Defaults are those of a config that leaves the
section out (`load_stack_config(None)`): `audio` is the `xtts` preset, `model` the `tiny`
one. Rerun after changing a field, a default or a docstring entry; rerunning changes
nothing otherwise. `tests/test_config_reference.py` fails while a table is stale.

usage: hatch run python docs/config_reference.py [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from xtts_audio.frozen_config import FrozenConfig
from xtts_train.config import load_stack_config

ROOT = Path(__file__).resolve().parents[1]
_README = {name: ROOT / "packages" / name / "README.md"
           for name in ("xtts-audio", "xtts-data", "xtts-train")}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Section:
    """One section of the stack config and the README whose table lists it.

    Attributes:
        name: the section's key in the YAML (`"audio"`).
        readme: the README holding its table.
        automatic: keys whose value the stack sets (a value given is replaced), each with
            where the value comes from.
    """

    name: str
    readme: Path
    automatic: Mapping[str, str] = dataclasses.field(default_factory=dict)


SECTIONS = (
    Section("audio", _README["xtts-audio"]),
    Section("data", _README["xtts-data"]),
    Section("model", _README["xtts-train"], automatic={
        "vocab_size": "the tokenizer (the cache's symbols)", "n_mels": "`audio.n_mels`",
    }),
    Section("train", _README["xtts-train"]),
    Section("vocoder", _README["xtts-train"], automatic={
        "n_mels": "`audio.n_mels`", "hop_length": "`audio.hop_length`",
    }),
    Section("decode", _README["xtts-train"]),
    Section("text_to_mel", _README["xtts-train"]),
)  # fmt: skip

# Fields whose class docstring has no entry of their own (another entry mentions them).
# An entry added to the docstring takes over from these.
_HEADER = "| key | default | meaning |\n|---|---|---|"
_ENTRY = re.compile(r"^ {4}(\w+(?:, \w+)*): (.*)$")
_SENTENCE_END = re.compile(r"(?<=\.)(?<!e\.g\.)(?<!i\.e\.) (?=[A-Z])")
_SET_FROM = re.compile(r" \(set from [^)]*\)")


def defaults() -> dict[str, FrozenConfig]:
    """Each section's config when a stack config leaves it out."""
    stack = load_stack_config(None)
    return {section.name: getattr(stack, section.name) for section in SECTIONS}


def render_default(value: Any) -> str:
    """A plain value (as `to_dict` gives it) as YAML writes it on one line: `null`, `40.0`,
    `[]`, `auto`, `[en, fa]`."""
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), sort_keys=False)
    return text.removesuffix("\n...\n").strip()


def default_preset(config: FrozenConfig) -> str | None:
    """The preset whose values are `config`'s (what a section without `preset` starts
    from), or None."""
    kind = type(config)
    return next((name for name in kind.presets if kind.from_preset(name) == config), None)


def leaves(config: FrozenConfig, prefix: str = "") -> Iterator[tuple[str, FrozenConfig, str]]:
    """`(key, owner, field)` of every field, in declaration order; a nested section's
    fields as `text.language`."""
    for name in config.field_names():
        value = getattr(config, name)
        if isinstance(value, FrozenConfig):
            yield from leaves(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", config, name


def meanings(kind: type[FrozenConfig]) -> dict[str, str]:
    """Each field's docstring entry (`name: text` or `a, b: text` at the entry indent,
    continued on deeper lines) cut to its first sentence, on one line; an entry of several
    fields starts with their names."""
    out = {}
    for names, text in _entries(kind):
        text = _first_sentence(text)
        shared = ", ".join(f"`{name}`" for name in names)
        out.update(dict.fromkeys(names, f"{shared}: {text}" if len(names) > 1 else text))
    return out


def _entries(kind: type[FrozenConfig]) -> list[tuple[list[str], str]]:
    """`(names, text)` of each docstring entry; entries run together as `dim: ...; layers:
    ...` are split at each field name."""
    entries: list[tuple[list[str], str]] = []
    fields, in_entry = kind.field_names(), False
    for line in (inspect.getdoc(kind) or "").splitlines():
        match = _ENTRY.match(line)
        if match and set(match[1].split(", ")) <= set(fields):
            entries.append((match[1].split(", "), match[2].strip()))
            in_entry = True
        elif in_entry and line.startswith(" " * 8):
            names, text = entries[-1]
            entries[-1] = (names, f"{text} {line.strip()}")
        else:
            in_entry = False
    out = []
    for names, text in entries:
        parts = re.split(rf"; ({'|'.join(fields)}): ", text)  # [text, name, text, ...]
        out.append((names, parts[0]))
        out += [([parts[i]], parts[i + 1]) for i in range(1, len(parts) - 1, 2)]
    return [(names, text if text.endswith(".") else text + ".") for names, text in out]


def _first_sentence(text: str) -> str:
    """`text` up to its first ". " before a capital letter outside parentheses and code
    (so "(e.g. Persian words)" and "Wang et al. 2017" go on)."""
    for match in _SENTENCE_END.finditer(text):
        head = text[: match.start()]
        if head.count("(") == head.count(")") and head.count("`") % 2 == 0:
            return head
    return text


def rows(section: Section, config: FrozenConfig) -> list[tuple[str, str, str]]:
    """`(key, default, meaning)` of every key of `section`, `preset` first where the
    class has presets.

    Raises:
        SystemExit: a field with no docstring entry (add one to the class docstring).
    """
    out = []
    if config.presets:
        out.append(("preset", render_default(default_preset(config)), _preset_meaning(config)))
    for key, owner, name in leaves(config):
        meaning = _described(type(owner)).get(name)
        if meaning is None:
            raise SystemExit(f"{type(owner).__name__}.{name}: no entry in its docstring; add one")
        if key in section.automatic:
            source = section.automatic[key]
            meaning = f"*set automatically from {source}, replacing a value given:* " + (
                _SET_FROM.sub("", meaning)
            )
        out.append((key, render_default(owner.to_dict()[name]), meaning))
    return out


@functools.cache
def _described(kind: type[FrozenConfig]) -> dict[str, str]:
    return meanings(kind)


def _preset_meaning(config: FrozenConfig) -> str:
    names = ", ".join(f"`{name}`" for name in config.presets)
    text = f"named starting values ({names}) the section's other keys override"
    required = config.required_fields()
    if required:
        text += f"; without one, the section must give {', '.join(map('`{}`'.format, required))}"
    return text + "."


def table(section: Section, config: FrozenConfig) -> str:
    """The markdown table of `section` (what goes between its markers)."""
    lines = [f"| `{key}` | `{default}` | {_cell(meaning)} |"
             for key, default, meaning in rows(section, config)]  # fmt: skip
    return "\n".join([_HEADER, *lines])


def _cell(text: str) -> str:
    return text.replace("|", r"\|")


def markers(name: str) -> tuple[str, str]:
    """The comments that open and close a section's table in its README."""
    return f"<!-- config-reference:{name} -->", f"<!-- /config-reference:{name} -->"


def block(readme_text: str, name: str) -> tuple[int, int]:
    """Where the text between `name`'s markers starts and ends in `readme_text`.

    Raises:
        SystemExit: the markers are missing or repeated.
    """
    start, end = markers(name)
    if readme_text.count(start) != 1 or readme_text.count(end) != 1:
        raise SystemExit(f"Expected one {start} and one {end} in the README")
    begin = readme_text.index(start) + len(start)
    return begin, readme_text.index(end, begin)


def update(readme_text: str, name: str, table_text: str) -> str:
    """`readme_text` with `table_text` between `name`'s markers (blank lines around it, so
    the comments and the table render as separate blocks)."""
    begin, end = block(readme_text, name)
    return f"{readme_text[:begin]}\n\n{table_text}\n\n{readme_text[end:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a table is out of date"
    )
    args = parser.parse_args(argv)
    configs, stale = defaults(), []
    for readme in dict.fromkeys(section.readme for section in SECTIONS):
        old = new = readme.read_text(encoding="utf-8")
        for section in (s for s in SECTIONS if s.readme == readme):
            new = update(new, section.name, table(section, configs[section.name]))
        if new != old:
            stale.append(str(readme.relative_to(ROOT)))
            if not args.check:
                readme.write_text(new, encoding="utf-8")
    verb = "out of date" if args.check else "rewritten"
    print(f"{verb}: {', '.join(stale)}" if stale else "config reference up to date")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
