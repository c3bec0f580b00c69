"""A tampered or inconsistent cache is a clear error naming what disagrees, at `verify`
and at every open; never a silent read."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from xtts_data import CacheError, FeatureCache, record, verify_cache
from xtts_data.cli import main
from xtts_data.manifest import Integrity


def _edit_manifest(cache, change) -> dict:
    path = cache / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))
    return manifest


def test_an_intact_cache_passes_every_record_check(cache):
    assert verify_cache(cache) == []


def test_settings_edited_after_the_build_are_named(cache_copy, capsys):
    _edit_manifest(cache_copy, lambda m: m["settings"]["audio"].update(n_mels=64))
    with pytest.raises(
        CacheError,
        match=r"settings were changed after the build \(audio.n_mels: built with 80, manifest says 64\)",
    ):
        FeatureCache.open(cache_copy)
    assert main(["verify", str(cache_copy)]) == 1
    assert "audio.n_mels: built with 80, manifest says 64" in capsys.readouterr().out


def test_an_edited_sample_is_found_at_open_and_named_by_verify(cache_copy):
    def shorten(manifest):
        manifest["samples"]["frames"][3] = 10

    _edit_manifest(cache_copy, shorten)
    with pytest.raises(CacheError, match=r"per-sample table .* was changed after the build"):
        FeatureCache.open(cache_copy)

    def reseal(manifest):  # an edit that also rewrote the checksum: the records disagree
        manifest["integrity"] = dataclasses.asdict(
            Integrity.of(manifest["samples"], (cache_copy / "tokenizer.json").read_bytes())
        )

    manifest = _edit_manifest(cache_copy, reseal)
    uid = manifest["samples"]["id"][3]
    (problem,) = verify_cache(cache_copy)
    assert f"({uid}): manifest says frames 10, the record holds" in problem


def test_a_changed_tokenizer_is_an_error(cache_copy):
    tokenizer = json.loads((cache_copy / "tokenizer.json").read_text())
    tokenizer["symbols"] = tokenizer["symbols"][::-1]
    (cache_copy / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(CacheError, match=r"tokenizer\.json is missing or differs"):
        FeatureCache.open(cache_copy)
    assert "tokenizer.json is missing or differs" in verify_cache(cache_copy)[0]


def test_a_speaker_index_outside_the_list_is_an_error(cache_copy):
    _edit_manifest(cache_copy, lambda m: m.update(speakers=[]))
    with pytest.raises(CacheError, match=r"speaker index \d+ is outside the manifest's 0 speakers"):
        FeatureCache.open(cache_copy)


@pytest.mark.parametrize("samples", [0, 1, 2, 513])
def test_a_record_whose_size_disagrees_with_its_header_is_named(samples):
    audio = np.linspace(-1, 1, samples) if samples else None
    raw = record.encode("x", 0, [3, 4, 1], [[0.0] * 80] * 2, 0, audio)
    assert record.read_header(raw, 80) == {"id": "x", "frames": 2, "tokens": 3, "speaker": 0,
                                           "samples": samples}  # fmt: skip
    assert len(raw) % 4 == 0
    assert f"{samples} samples" in record.read_header(raw[:-4], 80)
    assert "its header says" in record.read_header(raw + b"\0" * 4, 80)
    assert "magic word" in record.read_header(b"\0" * 4 * record.HEADER_WORDS, 80)
    assert "shorter than a header" in record.read_header(raw[: 4 * record.HEADER_WORDS - 1], 80)


def test_a_record_of_the_previous_format_is_named_by_its_magic_word():
    old = np.asarray([0x31545458, 2, 3, 0, 0, 1], "<i4").tobytes() + b"\0" * (4 * 164)
    assert record.read_header(old, 80) == "magic word 0x31545458, expected 0x32545458"
