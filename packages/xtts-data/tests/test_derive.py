"""`derive_mels`: a cache's copy with other frames in place of its mels, every other byte
kept, verified as any cache, resumed after a kill to the same bytes."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from data_helpers import AUDIO, DATA, read_records

from xtts_data import CacheError, FeatureCache, derive_mels, prepare, verify_cache

ORIGIN = {"run": "plus-one", "step": 1}


@pytest.fixture(scope="module")
def audio_cache(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("derive") / "cache"
    prepare(corpus, out, audio=AUDIO, data=dataclasses.replace(DATA, keep_audio=True), workers=2)
    return out


def _plus_one(utterances):
    assert all(u.audio is not None and len(u.audio) for u in utterances)  # the waveforms too
    return [u.mel + 1.0 for u in utterances]


def test_the_copy_holds_the_new_frames_and_every_other_byte(audio_cache, tmp_path):
    out = derive_mels(audio_cache, tmp_path / "gta", _plus_one, origin=ORIGIN, progress=False)
    assert verify_cache(out) == []
    source, derived = read_records(audio_cache), read_records(out)
    assert sorted(derived) == sorted(source)
    assert len(source) > 8  # more than one shard
    for uid, fields in source.items():
        np.testing.assert_array_equal(derived[uid]["mel"], fields["mel"] + 1.0)
        for name in ("tokens", "speaker", "split", "audio"):
            np.testing.assert_array_equal(derived[uid][name], fields[name], f"{uid} {name}")
    opened = FeatureCache.open(out, audio=AUDIO)
    assert opened.tokenizer == FeatureCache.open(audio_cache).tokenizer
    claim = json.loads((out / "derived.json").read_text())
    assert claim["origin"] == ORIGIN
    assert claim["source"] == str(audio_cache.resolve())


def test_a_killed_run_resumes_where_it_stopped_to_the_same_bytes(audio_cache, tmp_path):
    straight = derive_mels(audio_cache, tmp_path / "straight", _plus_one, origin=ORIGIN,
                           progress=False)  # fmt: skip
    calls = []

    def dies_on_the_second_shard(utterances):
        calls.append(len(utterances))
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a kill would, between shards
        return _plus_one(utterances)

    with pytest.raises(KeyboardInterrupt):
        derive_mels(audio_cache, tmp_path / "resumed", dies_on_the_second_shard, origin=ORIGIN,
                    progress=False)  # fmt: skip
    assert not (tmp_path / "resumed" / "manifest.json").exists()
    calls.clear()
    resumed = derive_mels(audio_cache, tmp_path / "resumed", _plus_one, origin=ORIGIN,
                          progress=False)  # fmt: skip
    shards = sorted(p.name for p in (straight / "shards").glob("*.tfrecord"))
    assert len(shards) >= 2
    for name in [*(f"shards/{s}" for s in shards), "manifest.json", "tokenizer.json"]:
        assert (resumed / name).read_bytes() == (straight / name).read_bytes(), name
    assert list((resumed / "shards").glob(".*.tmp")) == []


def test_frames_of_another_origin_or_shape_are_refused(audio_cache, tmp_path):
    out = derive_mels(audio_cache, tmp_path / "gta", _plus_one, origin=ORIGIN, progress=False)
    with pytest.raises(CacheError, match=r"holds frames of \{'run': 'plus-one'"):
        derive_mels(audio_cache, out, _plus_one, origin={"run": "other"}, progress=False)
    with pytest.raises(CacheError, match=r"Expected finite frames of shape \(\d+, 80\)"):
        derive_mels(audio_cache, tmp_path / "short", lambda us: [u.mel[1:] for u in us],
                    origin=ORIGIN, progress=False)  # fmt: skip
    with pytest.raises(CacheError, match="finite=False"):
        derive_mels(audio_cache, tmp_path / "nan", lambda us: [u.mel * np.nan for u in us],
                    origin=ORIGIN, progress=False)  # fmt: skip
