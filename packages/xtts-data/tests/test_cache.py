"""`prepare` / `verify`: reported bad rows, other formats, integrity, settings, resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
import yaml
from data_helpers import AUDIO, BAD_ROWS, DATA, OTHER_FORMATS, read_records
from fault_helpers import killed, run_with_fault

from xtts_audio import mel_features, resample
from xtts_data import (
    CacheError,
    ConfigError,
    DataConfig,
    FeatureCache,
    TextConfig,
    Tokenizer,
    format_summary,
    make_dataset,
    normalize_text,
    prepare,
    verify_cache,
    write_demo_corpus,
)
from xtts_data.cli import main
from xtts_data.manifest import sha256_file


def test_report_lists_every_bad_row_with_its_reason(cache):
    report = json.loads((cache / "report.json").read_text())
    reasons = {s["id"]: s["reason"] for s in report["skipped"]}
    for uid, reason in BAD_ROWS.items():
        matching = [r for i, r in reasons.items() if i.startswith(uid)]
        assert matching, f"{uid} not reported; report: {reasons}"
        assert matching[0].startswith(reason), (uid, matching[0])
    assert len(report["skipped"]) == len(BAD_ROWS)
    assert report["ok"] == 40 + len(OTHER_FORMATS)


def test_good_files_in_other_formats_match_their_audio(cache, corpus):
    records = read_records(cache)
    for uid, fmt in OTHER_FORMATS.items():
        wave, rate = soundfile.read(
            corpus / "wavs" / f"{uid}{fmt['suffix']}", dtype="float32", always_2d=True
        )
        wave = resample(wave.mean(axis=1), orig_sr=rate, target_sr=AUDIO.sample_rate)
        expected = mel_features(wave, AUDIO).numpy()
        np.testing.assert_allclose(records[uid]["mel"], expected, atol=2e-5, err_msg=uid)


def test_manifest_describes_every_sample_and_shard(cache):
    opened = FeatureCache.open(cache, audio=AUDIO, data=DATA)
    samples = opened.manifest.samples
    records = read_records(cache)
    assert sorted(samples.id) == sorted(records)
    for uid, frames, tokens in zip(samples.id, samples.frames, samples.tokens, strict=True):
        assert records[uid]["mel"].shape == (frames, AUDIO.n_mels)
        assert len(records[uid]["tokens"]) == tokens
        assert records[uid]["tokens"][-1] == opened.tokenizer.EOS
    assert opened.speakers == ["spk0", "spk1"]
    manifest = opened.manifest
    assert manifest.counts.ok == len(records)
    assert sum(s.samples for s in manifest.shards) == len(records)
    for shard, path in zip(manifest.shards, opened.shard_paths, strict=True):
        assert sha256_file(path) == shard.sha256
    assert json.loads((cache / "tokenizer.json").read_text()) == opened.tokenizer.to_dict()


def test_verify_passes_an_intact_cache(cache):
    assert verify_cache(cache) == []
    assert main(["verify", str(cache)]) == 0


def test_verify_names_the_shard_with_a_flipped_byte(cache_copy, capsys):
    shard = FeatureCache.open(cache_copy).shard_paths[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    problems = verify_cache(cache_copy)
    assert len(problems) == 1
    assert shard.name in problems[0]
    assert "checksum" in problems[0]
    assert main(["verify", str(cache_copy)]) == 1
    assert shard.name in capsys.readouterr().out


def test_verify_names_a_missing_shard_and_the_pipeline_refuses_it(cache_copy):
    shard = FeatureCache.open(cache_copy).shard_paths[0]
    shard.unlink()
    assert [p for p in verify_cache(cache_copy) if shard.name in p and "missing" in p]
    with pytest.raises(CacheError, match=shard.name):
        make_dataset(cache_copy, DATA)


def test_opening_with_other_settings_is_an_error(cache):
    other = AUDIO.__class__.from_preset("xtts", n_mels=64)
    with pytest.raises(CacheError, match="n_mels: cache has 80, requested 64"):
        FeatureCache.open(cache, audio=other)
    with pytest.raises(CacheError, match="other settings"):
        make_dataset(cache, DATA, audio=other)


def test_preparing_into_a_cache_of_other_settings_needs_overwrite(cache_copy, corpus):
    other = AUDIO.__class__.from_preset("xtts", n_mels=64)
    with pytest.raises(CacheError, match="--overwrite"):
        prepare(corpus, cache_copy, audio=other, data=DATA)


def test_rerunning_a_complete_build_changes_nothing(cache_copy, corpus, cache):
    result = prepare(corpus, cache_copy, audio=AUDIO, data=DATA)
    assert result.resumed_shards == result.shards
    assert (cache_copy / "manifest.json").read_bytes() == (cache / "manifest.json").read_bytes()


# A build killed at each kind of file event (fault_helpers), then run again: the cache is
# byte for byte the one an uninterrupted build makes, with no temp file left. The suite
# runs one event of each kind; `hatch run test-faults` runs every rename of the build.
EVENTS = {
    "temp file created": "before:shard-*.tfrecord:2",
    "renamed": "after:shard-*.tfrecord:1",
    "manifest written": "after:manifest.json:1",
}
# build.json, 7 shards x (records + sidecar), tokenizer.json, report.json, manifest.json
RENAMES = [("build.json", 1), *((f"shard-*.{ext}", n) for n in range(1, 8) for ext in ("tfrecord", "json")),
           ("tokenizer.json", 1), ("report.json", 1), ("manifest.json", 1)]  # fmt: skip
EVERY_EVENT = [f"{when}:{glob}:{n}" for glob, n in RENAMES for when in ("before", "after")]


def _prepare_args(corpus: Path, out: Path, config: Path) -> list[str]:
    return ["xtts_data.cli", "prepare", str(corpus), "--out", str(out), "--config",
            str(config), "--workers", "1", "--quiet"]  # fmt: skip


def _killed_build_resumes_to_identical_files(tmp_path, corpus, cache, event):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"audio": {"preset": "xtts"}, "data": {"shard_size": 8}}))
    out = tmp_path / "cache"
    assert killed(run_with_fault(event, *_prepare_args(corpus, out, config)))
    resumed = run_with_fault(None, *_prepare_args(corpus, out, config))
    assert resumed.returncode == 0, resumed.stderr
    assert "utterances" in resumed.stdout

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and p.name != ".lock"}  # fmt: skip

    assert files(out) == files(cache)  # manifest (with shard checksums), report, shards


# One kill in the default tier; the other events (a process each) in the slow tier, and
# every rename in the fault matrix (`-m faults`).
@pytest.mark.parametrize("event", [
    pytest.param(event, id=name, marks=[pytest.mark.slow] * (name != "temp file created"))
    for name, event in EVENTS.items()
])  # fmt: skip
def test_killed_build_resumes_to_identical_files(tmp_path, corpus, cache, event):
    _killed_build_resumes_to_identical_files(tmp_path, corpus, cache, event)


@pytest.mark.faults
@pytest.mark.parametrize("event", EVERY_EVENT)
def test_a_build_killed_at_any_rename_resumes_to_identical_files(tmp_path, corpus, cache, event):
    _killed_build_resumes_to_identical_files(tmp_path, corpus, cache, event)


def test_out_of_vocabulary_characters_are_counted_and_reported(tmp_path):
    corpus = tmp_path / "corpus"
    write_demo_corpus(corpus, n=3, max_seconds=1.0)
    letters = DataConfig(text=TextConfig(symbols="abcdefghijklmnopqrstuvwxyz "))
    result = prepare(corpus, tmp_path / "cache", audio=AUDIO, data=letters)
    report = json.loads((tmp_path / "cache" / "report.json").read_text())
    texts = [
        line.split("|")[2] or line.split("|")[1]
        for line in (corpus / "metadata.csv").read_text().splitlines()
    ]
    periods = sum(normalize_text(t, letters.text).count(".") for t in texts)
    assert periods > 0
    assert report["oov"]["."] == periods == result.oov["."]
    assert "unknown" in format_summary(result)
    tokenizer = Tokenizer.from_dict(json.loads((tmp_path / "cache" / "tokenizer.json").read_text()))
    assert tokenizer.symbols == "abcdefghijklmnopqrstuvwxyz "


def test_length_outliers_are_reported_and_clips_over_max_seconds_skipped(tmp_path):
    root = tmp_path / "corpus"
    (root / "wavs").mkdir(parents=True)
    lengths = {f"u{i:02d}": 0.5 + 0.05 * i for i in range(12)} | {"long": 6.0, "huge": 21.0}
    rng = np.random.default_rng(0)
    for uid, seconds in lengths.items():
        wave = 0.1 * rng.standard_normal(int(seconds * 22050)).astype(np.float32)
        soundfile.write(root / "wavs" / f"{uid}.wav", wave, 22050)
    (root / "metadata.csv").write_text("".join(f"{uid}|Some words.\n" for uid in lengths))
    result = prepare(root, tmp_path / "cache", audio=AUDIO, data=DATA)
    assert result.ok == 13
    assert [(s.id, s.reason) for s in result.skipped] == [
        ("huge", "too long: 21.0 s, over data.max_seconds=20.0")
    ]
    assert result.outliers == ({"id": "long", "seconds": 6.0},)
    report = json.loads((tmp_path / "cache" / "report.json").read_text())
    assert report["outliers"] == [{"id": "long", "seconds": 6.0}]
    assert "outliers   1 utterance(s) far from the corpus's lengths, kept" in format_summary(result)
    with pytest.raises(ConfigError, match=r"DataConfig.max_seconds: expected a positive"):
        DataConfig(max_seconds=0)
