"""manifest.json is read into a typed `Manifest` and written back byte for byte; a
missing or mistyped key, or another format, is a `CacheError` naming the key and the file."""

from __future__ import annotations

import copy
import json

import pytest

from xtts_data import CacheError, FeatureCache, verify_cache
from xtts_data.files import write_json_atomic
from xtts_data.manifest import FORMAT_VERSION, Manifest


@pytest.fixture(scope="module")
def raw(cache) -> dict:
    """The shared cache's manifest.json, parsed (tests change copies)."""
    return json.loads((cache / "manifest.json").read_text(encoding="utf-8"))


def _without(raw: dict, path: str) -> dict:
    """A copy of `raw` without the key at dotted `path` (`shards.0.sha256`)."""
    edited = copy.deepcopy(raw)
    *parents, last = path.split(".")
    node = edited
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    del node[last]
    return edited


def test_the_manifest_round_trips_to_the_same_bytes(cache, raw, tmp_path):
    manifest = Manifest.read(cache)
    assert Manifest.from_json(manifest.to_json()) == manifest
    assert manifest.to_json() == raw
    write_json_atomic(tmp_path / "manifest.json", manifest.to_json())
    assert (tmp_path / "manifest.json").read_bytes() == (cache / "manifest.json").read_bytes()
    assert FeatureCache.open(cache).manifest == manifest


def test_the_typed_manifest_describes_the_cache(cache, raw):
    manifest = FeatureCache.open(cache).manifest
    assert len(manifest.samples) == manifest.counts.ok == len(raw["samples"]["id"])
    assert manifest.samples.frames.dtype == "int64"
    assert manifest.speakers == tuple(raw["speakers"])
    assert [s.file for s in manifest.shards] == [s["file"] for s in raw["shards"]]
    assert manifest.settings.audio == raw["settings"]["audio"]
    with pytest.raises(ValueError, match="read-only"):
        manifest.samples.frames[0] = 1  # shared by every reader of the opened cache


@pytest.mark.parametrize(
    ("key", "named"),
    [("num_mels", "'num_mels' is missing"), ("counts.ok", "'counts.ok' is missing"),
     ("samples.frames", "'samples.frames' is missing"), ("settings.audio", "'settings.audio' is missing"),
     ("shards.0.sha256", r"'shards\[0\].sha256' is missing"), ("integrity", "'integrity' is missing")],
)  # fmt: skip
def test_a_missing_key_is_named_with_the_file(raw, key, named, tmp_path):
    with pytest.raises(CacheError, match=rf"cache/manifest\.json: key {named}"):
        Manifest.from_json(_without(raw, key), file=tmp_path / "cache" / "manifest.json")


@pytest.mark.parametrize(
    ("edit", "named"),
    [(lambda m: m.update(num_mels="80"), "'num_mels' is str, expected int"),
     (lambda m: m["counts"].update(ok=True), "'counts.ok' is bool, expected int"),
     (lambda m: m["samples"]["frames"].__setitem__(0, 1.5), "'samples.frames' is not a list of int"),
     (lambda m: m["speakers"].append(3), "'speakers' is not a list of str"),
     (lambda m: m["shards"].__setitem__(0, "x"), r"'shards\[0\]' is str, expected dict")],
)  # fmt: skip
def test_a_mistyped_key_is_named_with_the_file(raw, edit, named):
    edited = copy.deepcopy(raw)
    edit(edited)
    with pytest.raises(CacheError, match=rf"manifest\.json: key {named}"):
        Manifest.from_json(edited)


def test_another_format_is_named_at_open(cache_copy, raw):
    old = dict(raw, format=FORMAT_VERSION - 1)
    (cache_copy / "manifest.json").write_text(json.dumps(old), encoding="utf-8")
    expected = rf"cache/manifest\.json: cache format {FORMAT_VERSION - 1}, this xtts-data reads"
    with pytest.raises(CacheError, match=expected):
        FeatureCache.open(cache_copy)


def test_a_missing_key_is_named_at_open_and_by_verify(cache_copy, raw):
    (cache_copy / "manifest.json").write_text(json.dumps(_without(raw, "counts")))
    with pytest.raises(CacheError, match=r"manifest\.json: key 'counts' is missing"):
        FeatureCache.open(cache_copy)
    assert "key 'counts' is missing" in verify_cache(cache_copy)[0]
