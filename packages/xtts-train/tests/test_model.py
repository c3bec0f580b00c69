"""TextToMel, ModelConfig and the losses: shapes, masking, causality, XLA, training signal."""

from __future__ import annotations

import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest
import scipy.fft
import tensorflow as tf

from xtts_audio import MelConfig, mel_features
from xtts_train import (
    ConfigError,
    DecodeConfig,
    ModelConfig,
    TextToMel,
    masked_l1,
    stop_loss,
    total_loss,
)
from xtts_train.config import MEL_MEAN, MEL_STD
from xtts_train.models.features import standardize
from xtts_train.models.text_to_mel import model as model_module
from xtts_train.models.text_to_mel.frames import (
    clip_stats,
    match_global_variance,
    pitch_stats,
    within_range,
)
from xtts_train.models.text_to_mel.free_running import infer
from xtts_train.models.text_to_mel.postfilters import decode_frames
from xtts_train.models.text_to_mel.streaming import Streaming

# Prenet dropout stays on at inference; tests comparing two forward passes switch it off.
DETERMINISTIC = dict(prenet_dropout=0.0)
# One layer of each kind, for tests of a property no depth changes (what the frames'
# statistics or the postfilters put out, which frames a voice's pitch is read from): an
# eager forward pass and decoding cost about half the tiny model's.
# One layer each: content alignment (the relative one needs a second decoder block).
ONE_LAYER = dict(
    text_layers=1, decoder_layers=1, cond_layers=1, postnet_layers=1, alignment="content"
)
VOICE_STATS = {"voice_stats": "mean_std"}
VOICE_PITCH = {"voice_pitch": True, "voice_stats": "mean_std"}
RELATIVE = {"alignment": "relative"}  # location-relative alignment (`location`)
AUDIO = MelConfig.from_preset("xtts")  # the features' recipe, for `pitch_stats`
# `tiny` at one layer of each kind and small widths (train_helpers.MICRO's sizes).
MICRO = dict(**ONE_LAYER, d_model=32, heads=2, cond_latents=2, prenet_dim=32,
             postnet_channels=32, text_convs=1, cond_convs=1)  # fmt: skip


def make_batch(config: ModelConfig, *, text_len=8, frames=16, cond_frames=16, seed=0):
    """A `DatasetSpec`-shaped batch of 2: row 0 fills every length, row 1 is padded."""
    rng = np.random.default_rng(seed)
    m = config.n_mels
    token_lengths = np.array([text_len, text_len - 3])
    mel_lengths = np.array([frames, frames - 5])
    token_mask = np.arange(text_len)[None] < token_lengths[:, None]  # (B, T)
    mel_mask = np.arange(frames)[None] < mel_lengths[:, None]  # (B, F)
    tokens = np.where(token_mask, rng.integers(2, config.vocab_size, (2, text_len)), 0)
    steps, bins = np.arange(frames)[None, :, None], np.arange(m)[None, None, :]
    phase = np.array([0.0, 1.5])[:, None, None]
    mel = np.where(mel_mask[..., None], -5 + 3 * np.sin(0.3 * steps + 0.1 * bins + phase), 0)
    return {
        "tokens": tf.constant(tokens, tf.int32),
        "token_lengths": tf.constant(token_lengths, tf.int32),
        "token_mask": tf.constant(token_mask, tf.float32),
        "mel": tf.constant(mel, tf.float32),
        "mel_lengths": tf.constant(mel_lengths, tf.int32),
        "mel_mask": tf.constant(mel_mask, tf.float32),
        "stop_targets": tf.constant(
            np.arange(frames)[None] >= mel_lengths[:, None] - 1, tf.float32
        ),
        "speaker": tf.zeros([2], tf.int32),
        "cond_mel": tf.constant(rng.uniform(-11.5, 2.0, (2, cond_frames, m)), tf.float32),
        "cond_lengths": tf.constant([cond_frames, cond_frames - 4], tf.int32),
    }


def harmonic_mel(f0s, frames: int) -> np.ndarray:
    """Features of steady voiced sounds, one per pitch in `f0s`: float32 [len(f0s), frames, 80]."""
    rate, hop = AUDIO.sample_rate, AUDIO.hop_length
    t = np.arange((frames - 1) * hop) / rate
    waves = [sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 12)) for f0 in f0s]
    return mel_features(np.stack(waves).astype(np.float32) * 0.1, AUDIO).numpy()


def tiny_model(**overrides) -> TextToMel:
    keras.utils.set_random_seed(0)
    return TextToMel(ModelConfig.from_preset("tiny", **overrides), AUDIO)


def replace(batch, **fields):
    return {**batch, **{k: tf.constant(v, batch[k].dtype) for k, v in fields.items()}}


# --- config ------------------------------------------------------------------------------


def test_defaults_are_the_tiny_preset_and_dicts_round_trip():
    assert ModelConfig() == ModelConfig.from_preset("tiny")
    config = ModelConfig.from_dict({"preset": "tiny", "vocab_size": 40})
    assert config.vocab_size == 40
    assert config.d_model == 128  # the tiny preset: the defaults
    assert ModelConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (dict(d_model=130, heads=4), "d_model=130"),
        (dict(heads=0), "heads=0"),
        (dict(vocab_size=True), "vocab_size=True"),
        (dict(text_layers=1.5), "text_layers=1.5"),
        (dict(dropout=1.0), "dropout=1.0"),
        (dict(prenet_dropout=-0.1), "prenet_dropout=-0.1"),
        (dict(voice_pitch=1), "voice_pitch=1"),
        (dict(pitch_contour=True), r"unknown field\(s\) \['pitch_contour'\]"),
        (dict(n_layers=2), r"unknown field\(s\) \['n_layers'\]"),
        (dict(alignment="gmm"), "content, relative.*alignment='gmm'"),
        (dict(alignment="relative", decoder_layers=1), "at least 2 with.*decoder_layers=1"),
    ],
)
def test_invalid_config_names_the_field(overrides, match):
    with pytest.raises(ConfigError, match=match):
        ModelConfig.from_preset("tiny", **overrides)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ModelConfig.from_preset("huge"),
        lambda: ModelConfig.from_dict({"preset": "huge"}),
    ],
)
def test_unknown_preset_is_named(build):
    with pytest.raises(ConfigError, match="name='huge'"):
        build()


def test_from_dict_rejects_unknown_keys_without_preset():
    with pytest.raises(ConfigError, match="unknown field"):
        ModelConfig.from_dict({"d_model": 64, "layers": 2})


# --- model structure ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "low", "high"),
    [("tiny", 0.5e6, 2e6), ("small", 10e6, 20e6), ("base", 60e6, 100e6)],
)
def test_preset_parameter_counts(preset, low, high):
    model = TextToMel(ModelConfig.from_preset(preset))
    assert low < model.parameter_count() < high


def test_describe_lists_every_component_and_the_total():
    model = tiny_model()
    text = model.describe()
    for name in ("text_encoder", "cond_encoder", "decoder", "heads", "postnet"):
        assert name in text
    assert text.splitlines()[-1].split()[-1] == f"{model.parameter_count():,}"


def test_forward_shapes_and_dtypes():
    model = tiny_model()
    outputs = model(make_batch(model.config, text_len=8, frames=16, cond_frames=12))
    assert {k: tuple(v.shape) for k, v in outputs.items()} == {
        "mel_before": (2, 16, 80),
        "mel_after": (2, 16, 80),
        "stop_logits": (2, 16),
        "attention": (2, 16, 8),
    }
    assert all(v.dtype == tf.float32 for v in outputs.values())
    assert all(np.isfinite(v.numpy()).all() for v in outputs.values())
    attention = outputs["attention"].numpy()
    assert (attention >= 0).all()
    assert (attention.sum(axis=2) <= 1 + 1e-5).all()
    assert np.abs(attention[1, :, 5:]).max() == 0  # row 1's padded tokens get no attention


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("mel", tf.zeros([2, 16, 64]), r"n_mels=80 .* mel.shape=\(2, 16, 64\)"),
        ("cond_mel", tf.zeros([2, 16, 64]), r"cond_mel.shape=\(2, 16, 64\)"),
        ("tokens", None, "Expected a batch with fields"),
    ],
)
def test_bad_batch_is_rejected(field, value, match):
    model = tiny_model()
    batch = make_batch(model.config)
    if value is None:
        del batch[field]
    else:
        batch[field] = value
    with pytest.raises(ConfigError, match=match):
        model(batch)


def test_decoder_is_causal():
    model = tiny_model(**DETERMINISTIC)
    batch = make_batch(model.config)
    k = 6
    mel = batch["mel"].numpy()
    mel[:, k:] += np.random.default_rng(1).normal(0, 3, mel[:, k:].shape)
    before, after = model(batch), model(replace(batch, mel=mel))
    for name in ("mel_before", "stop_logits"):
        # Frame t sees frames < t: changing frames >= k leaves frames <= k as they were.
        np.testing.assert_allclose(before[name][:, : k + 1], after[name][:, : k + 1], atol=1e-5)
        assert not np.allclose(before[name][:, k + 1], after[name][:, k + 1], atol=1e-3)


def test_the_voice_s_pitch_reaches_every_frame():
    field, layer = "voice_pitch", "pitch"
    model = tiny_model(**DETERMINISTIC, **ONE_LAYER, **{field: True})
    batch = make_batch(model.config)
    batch = replace(batch, cond_mel=harmonic_mel([110, 220], 16))  # a pitch to read
    model(batch)
    with tf.GradientTape() as tape:
        last = model(batch)["mel_before"][:, -1]  # (B, M)
    assert float(tf.norm(tape.gradient(last, getattr(model.decoder, layer).kernel))) > 0
    assert layer in {v.path.split("/")[-2] for v in model.trainable_variables}


def test_voice_pitch_needs_the_features_recipe():
    config = ModelConfig.from_preset("tiny", voice_pitch=True)
    with pytest.raises(ConfigError, match=r"audio recipe with n_mels=80.*voice_pitch"):
        TextToMel(config)
    with pytest.raises(ConfigError, match=r"audio recipe with n_mels=80"):
        TextToMel(config, MelConfig.from_preset("xtts", n_mels=64))


def test_voice_pitch_is_the_mean_and_deviation_of_log2_pitch_over_harmonic_frames():
    mel = harmonic_mel([120, 240, 0], 40)  # (3, F, M); f0 0: silence, no harmonic frame
    mask = np.ones(mel.shape[:2], np.float32)
    mask[1, 20:] = 0  # padding is not read
    pitch = pitch_stats(mel, tf.constant(mask), AUDIO).numpy()  # (3, 1, 2)
    assert pitch.shape == (3, 1, 2)
    for row, f0 in enumerate((120, 240)):
        assert pitch[row, 0, 0] == pytest.approx(np.log2(f0 / 150), abs=0.06)
        assert pitch[row, 0, 1] < 0.1  # a steady pitch
    np.testing.assert_array_equal(pitch[2], 0.0)


@pytest.mark.parametrize("source", ["clip", "utterance"])
def test_the_pitch_comes_from_the_frames_the_statistics_come_from(monkeypatch, source):
    # Teacher forcing reads the spoken utterance's pitch with voice_stats_source=utterance
    # (16 frames here), the clip's otherwise (10); decoding reads the clip's.
    model = tiny_model(**DETERMINISTIC, **ONE_LAYER, **VOICE_PITCH, voice_stats_source=source)
    batch = make_batch(model.config, frames=16, cond_frames=10)
    read = []
    monkeypatch.setattr(model_module, "pitch_stats",
                        lambda mel, *a: read.append(mel.shape[1]) or pitch_stats(mel, *a))  # fmt: skip
    model(batch)
    assert read == [16 if source == "utterance" else 10]
    args = [batch[k] for k in ("tokens", "token_mask", "cond_mel", "cond_lengths")]
    infer(model, *args, max_frames=4)
    assert read[1:] == [10]


def test_voice_stats_are_the_clips_own_statistics():
    config = ModelConfig.from_preset("tiny")
    batch = make_batch(config, cond_frames=16)  # row 1: 12 real reference frames
    mask = tf.sequence_mask(batch["cond_lengths"], 16, tf.float32)
    cond = standardize(batch["cond_mel"])
    stats = clip_stats(cond, mask).numpy()  # (B, 2, M)
    for row, real in enumerate([16, 12]):
        frames = (batch["cond_mel"].numpy()[row, :real] - MEL_MEAN) / MEL_STD
        np.testing.assert_allclose(stats[row, 0], frames.mean(axis=0), atol=1e-5)
        scale = np.maximum(frames.std(axis=0), 0.1)
        np.testing.assert_allclose(stats[row, 1], scale, atol=1e-5)
    constant = standardize(tf.fill([1, 4, 80], -5.0))  # a channel that never moves
    assert np.allclose(clip_stats(constant, tf.ones([1, 4])).numpy()[0, 1], 0.1)  # not 0


def silent_heads(**overrides):
    """A deterministic one-layer tiny model whose mel head writes zeros, a batch, and its
    teacher-forced `mel_before` (B, F, M): what the frames' statistics alone put out."""
    model = tiny_model(**DETERMINISTIC, **ONE_LAYER, **overrides)
    batch = make_batch(model.config, cond_frames=16)
    model(batch)
    for weight in model.mel_head.weights:
        weight.assign(tf.zeros_like(weight))
    return model, batch, model(batch)["mel_before"].numpy()


@pytest.mark.parametrize("mode", ["off", "mean_std"])
def test_voice_stats_set_the_voices_spectral_statistics(mode):
    # Heads that write zeros (the clip's mean, in its units) put out the clip's mean at
    # every frame, whatever the text; with voice_stats off, the corpus's fixed mean.
    _, batch, before = silent_heads(voice_stats=mode)
    for row, real in enumerate([16, 12]):
        clip_mean = batch["cond_mel"].numpy()[row, :real].mean(axis=0)  # (M,)
        want = MEL_MEAN if mode == "off" else np.broadcast_to(clip_mean, (16, 80))
        np.testing.assert_allclose(before[row], np.broadcast_to(want, (16, 80)), atol=1e-4)


def test_a_clip_moved_in_level_moves_the_decoded_voice_alike():
    # The clip reaches the frames through its statistics alone: the same clip, louder in
    # some channels and wider, decodes to the same frames moved and scaled alike, with the
    # same stop probabilities.
    scale = 1.5
    model = tiny_model(**DETERMINISTIC, **ONE_LAYER, **VOICE_STATS, reduction_factor=2)
    batch = make_batch(model.config, cond_frames=16)
    model(batch)
    model.stop_head.bias.assign([-20.0] * 2)  # the whole buffer
    offset = np.linspace(-1.0, 1.0, 80)  # standardised units
    cond = (batch["cond_mel"].numpy() - MEL_MEAN) / MEL_STD
    moved = (scale * cond + offset) * MEL_STD + MEL_MEAN
    args = [batch[k] for k in ("tokens", "token_mask", "cond_mel", "cond_lengths")]
    first = infer(model, *args, max_frames=10)
    second = infer(model, *args[:2], tf.constant(moved, tf.float32), args[3], max_frames=10)
    want = scale * (first["mel_before"].numpy() - MEL_MEAN) / MEL_STD + offset
    np.testing.assert_allclose(second["mel_before"], want * MEL_STD + MEL_MEAN,
                               atol=1e-3)  # fmt: skip
    np.testing.assert_allclose(second["stop_probs"], first["stop_probs"], atol=1e-6)


def test_voice_stats_are_checked():
    with pytest.raises(ConfigError, match=r"voice_stats.*one of off, mean_std"):
        ModelConfig(voice_stats="adain")
    with pytest.raises(ConfigError, match=r"voice_stats.*\"mean\".*was removed, measured worse"):
        ModelConfig(voice_stats="mean")
    with pytest.raises(ConfigError, match=r"voice_stats_source.*one of clip, utterance"):
        ModelConfig(voice_stats="mean_std", voice_stats_source="target")
    with pytest.raises(ConfigError, match=r"voice_stats_source.*clip while voice_stats is off"):
        ModelConfig(voice_stats_source="utterance")


def test_teacher_forcing_can_normalise_by_the_spoken_utterance_s_own_statistics():
    # With voice_stats_source=utterance, heads that write zeros put out the spoken
    # utterance's own mean over its real frames, not the clip's; the clip's level then
    # changes nothing in training (the latents read it normalised), and inference still
    # takes the clip's statistics, having no utterance.
    model, batch, before = silent_heads(voice_stats="mean_std", voice_stats_source="utterance")
    for row, real in enumerate([16, 11]):
        own = batch["mel"].numpy()[row, :real].mean(axis=0)  # (M,)
        np.testing.assert_allclose(before[row], np.broadcast_to(own, (16, 80)), atol=1e-4)
    louder = replace(batch, cond_mel=batch["cond_mel"].numpy() * 1.5 + 2.0)
    np.testing.assert_allclose(model(louder)["mel_before"], before, atol=1e-4)
    args = [batch[k] for k in ("tokens", "token_mask", "cond_mel", "cond_lengths")]
    inferred = infer(model, *args, max_frames=4)["mel_before"].numpy()
    clip = batch["cond_mel"].numpy()[0].mean(axis=0)
    np.testing.assert_allclose(inferred[0], np.broadcast_to(clip, (4, 80)), atol=1e-4)


def cepstra(frames: np.ndarray) -> np.ndarray:
    """Log-mel frames (F, M) → their cepstra (F, M): the orthonormal DCT-II, by SciPy."""
    return scipy.fft.dct(frames, type=2, norm="ortho", axis=-1)


def test_global_variance_scales_each_cepstral_deviation_to_the_clip_s():
    rng = np.random.default_rng(0)
    mel = rng.normal(-5.0, 1.0, [2, 12, 80]).astype(np.float32)
    clip = rng.normal(-4.0, 2.0, [2, 10, 80]).astype(np.float32)
    mask, clip_mask = np.ones([2, 12], np.float32), np.ones([2, 10], np.float32)
    mask[1, 9:], clip_mask[0, 7:] = 0.0, 0.0  # real frames: 12 and 9; the clips' 7 and 10
    out = match_global_variance(*map(tf.constant, (mel, mask, clip, clip_mask))).numpy()
    for row, (real, clip_real) in enumerate([(12, 7), (9, 10)]):
        got, had = cepstra(out[row, :real]), cepstra(mel[row, :real])
        want = cepstra(clip[row, :clip_real]).std(axis=0)  # (M,) the clip's deviations
        np.testing.assert_allclose(got.std(axis=0), want, rtol=1e-3)
        np.testing.assert_allclose(got.mean(axis=0), had.mean(axis=0), atol=1e-3)  # kept
        ratio = (got - had.mean(axis=0)) / (had - had.mean(axis=0))  # one scale per coefficient
        np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:1], ratio.shape), rtol=1e-2)
    np.testing.assert_array_equal(out[1, 9:], mel[1, 9:])  # past the end: as decoded
    # Frames with the clip's own variance come back as they are.
    same = match_global_variance(*map(tf.constant, (clip, clip_mask, clip, clip_mask)))
    np.testing.assert_allclose(same.numpy(), clip, atol=1e-4)


def test_the_postfilter_keeps_each_channel_within_the_clip_s_levels():
    rng = np.random.default_rng(1)
    decoded = rng.normal(-5.0, 0.01, [2, 12, 80]).astype(np.float32)  # smooth, as decoders are
    decoded[:, 3, 0] += 0.5  # one frame's bump in the lowest channel
    clip = rng.normal(-4.0, 2.0, [2, 10, 80]).astype(np.float32)
    mask, clip_mask = np.ones([2, 12], np.float32), np.ones([2, 10], np.float32)
    mask[1, 9:], clip_mask[0, 7:] = 0.0, 0.0  # real frames: 12 and 9; the clips' 7 and 10
    clip[0, 8] = 100.0  # past the clip's end: no level of the voice's
    args = [tf.constant(a) for a in (decoded, mask, clip, clip_mask)]
    matched = match_global_variance(*args).numpy()
    held = within_range(tf.constant(matched), *args[1:]).numpy()
    for row, (real, clip_real) in enumerate([(12, 7), (9, 10)]):
        low, high = clip[row, :clip_real].min(0), clip[row, :clip_real].max(0)  # (M,) each
        assert (matched[row, :real] > high + 1.0).any()  # the scaling overshoots here
        np.testing.assert_array_equal(held[row, :real], np.clip(matched[row, :real], low, high))
    np.testing.assert_array_equal(held[1, 9:], matched[1, 9:])  # past the end: as matched
    # The clip's own frames are within its levels: they come back as they are.
    np.testing.assert_array_equal(within_range(*args[2:], *args[2:]), clip)


def test_the_global_variance_stage_matches_the_clip_s_only_when_configured():
    model = tiny_model(**DETERMINISTIC, **ONE_LAYER)
    batch = make_batch(model.config, cond_frames=16)
    model(batch)
    model.stop_head.bias.assign([-20.0])  # the whole buffer
    inputs = [batch[k] for k in ("tokens", "token_mask", "cond_mel", "cond_lengths")]
    first = infer(model, *inputs, max_frames=8)
    second = decode_frames(model, DecodeConfig(global_variance=True), *inputs, max_frames=8)
    np.testing.assert_array_equal(second["mel_before"], first["mel_before"])
    clip_mask = tf.sequence_mask(batch["cond_lengths"], 16, tf.float32)
    args = (first["mel"], tf.ones([2, 8]), batch["cond_mel"], clip_mask)
    want = within_range(match_global_variance(*args), *args[1:])
    np.testing.assert_allclose(second["mel"], want, atol=1e-4)
    assert not np.allclose(second["mel"], first["mel"], atol=1e-2)
    plain = decode_frames(model, DecodeConfig(), *inputs, max_frames=8)
    np.testing.assert_array_equal(plain["mel"], first["mel"])  # no stage: the model's frames
    # A stream has the utterance's variance only at its end: refused, not silently unlike.
    with pytest.raises(ConfigError, match=r"decode\.global_variance=false to stream"):
        Streaming(model, decode=DecodeConfig(global_variance=True), cond_frames=16,
                  max_frames=8)  # fmt: skip


@pytest.mark.parametrize(("field", "voice"), [("tokens", {}), ("cond_mel", {}),
                                             ("cond_mel", VOICE_STATS)])  # fmt: skip
def test_padding_of_inputs_is_ignored(field, voice):
    model = tiny_model(**DETERMINISTIC, **voice)
    batch = make_batch(model.config, cond_frames=16)
    changed = batch[field].numpy()
    if field == "tokens":
        changed[1, 5:] = 7  # row 1 has 5 real tokens
    else:
        changed[1, 12:] = 1.5  # row 1 has 12 real reference frames
    before, after = model(batch), model(replace(batch, **{field: changed}))
    for name in before:
        np.testing.assert_allclose(before[name], after[name], atol=1e-5)


# --- losses ---------------------------------------------------------------------------


def test_losses_match_hand_computed_values():
    pred = tf.constant([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]])  # (1, 3, 2)
    mask = tf.constant([[1.0, 1.0, 0.0]])
    assert float(masked_l1(pred, tf.zeros_like(pred), mask)) == pytest.approx(10 / 4)
    logits, targets = tf.constant([[0.0, 0.0, 5.0]]), tf.constant([[0.0, 1.0, 1.0]])
    # frame 0: log 2; frame 1 (stop, weight 5): 5 log 2; frame 2 is padding.
    expected_stop = (math.log(2) + 5 * math.log(2)) / 2
    assert float(stop_loss(logits, targets, mask, 5.0)) == pytest.approx(expected_stop)
    # Two real frames over one real token (of two): no penalty on frame 0 (t/N = f/F = 0),
    # frame 1 at distance 1/2 from the diagonal.
    attention = tf.constant([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])  # (1, 3, 2)
    outputs = {"mel_before": pred, "mel_after": pred * 0, "stop_logits": logits,
               "attention": attention}  # fmt: skip
    batch = {"mel": tf.zeros_like(pred), "mel_mask": mask, "stop_targets": targets,
             "token_mask": tf.constant([[1.0, 0.0]])}  # fmt: skip
    losses = total_loss(outputs, batch, stop_weight=0.5, pos_weight=5.0, guided_weight=2.0,
                        guided_sigma=0.5)  # fmt: skip
    expected_guided = (1 - math.exp(-(0.5**2) / (2 * 0.5**2))) / 2
    assert float(losses["guided_attention"]) == pytest.approx(expected_guided)
    assert float(losses["loss"]) == pytest.approx(2.5 + 0.5 * expected_stop + 2 * expected_guided)
    assert float(losses["alignment"]) == pytest.approx(1.0)  # all on the one real token


def test_losses_ignore_padded_frames():
    config = ModelConfig.from_preset("tiny")
    batch = make_batch(config)
    rng = np.random.default_rng(2)
    outputs = {
        "mel_before": rng.normal(-5, 2, (2, 16, 80)),
        "mel_after": rng.normal(-5, 2, (2, 16, 80)),
        "stop_logits": rng.normal(0, 2, (2, 16)),
        "attention": rng.uniform(0, 1 / 8, (2, 16, 8)),
    }
    padded = {k: v.copy() for k, v in outputs.items()}
    for value in padded.values():
        value[1, 11:] = 123.0  # row 1 has 11 real frames
    padded["attention"][1, :, 5:] = 0.9  # and 5 real tokens
    as_tensors = lambda d: {k: tf.constant(v, tf.float32) for k, v in d.items()}  # noqa: E731
    first = total_loss(as_tensors(outputs), batch)
    second = total_loss(as_tensors(padded), batch)
    for name in first:
        assert float(first[name]) == pytest.approx(float(second[name]), rel=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [(dict(stop_weight=-1.0), "stop_weight=-1.0"), (dict(pos_weight="5"), "pos_weight='5'"),
     (dict(guided_weight=-2.0), "guided_weight=-2.0")],
)  # fmt: skip
def test_loss_weights_are_checked(kwargs, match):
    batch = make_batch(ModelConfig.from_preset("tiny"))
    outputs = {
        "mel_before": batch["mel"],
        "mel_after": batch["mel"],
        "stop_logits": batch["mel_mask"],
        "attention": tf.zeros([2, 16, 8]),
    }
    with pytest.raises(ConfigError, match=match):
        total_loss(outputs, batch, **kwargs)


def test_a_batch_without_a_frame_mask_is_all_real_frames():
    # Keras once took the postnet's mask, passed by position as None, for its own.
    model = tiny_model(**ONE_LAYER)
    batch = make_batch(model.config)
    model(batch)
    unmasked = {k: v for k, v in batch.items() if k != "mel_mask"}
    real = {**batch, "mel_mask": tf.ones(batch["mel"].shape[:2])}
    np.testing.assert_array_equal(model(unmasked, prenet_dropout=False)["mel_after"],
                                  model(real, prenet_dropout=False)["mel_after"])  # fmt: skip


# --- compiled training and inference --------------------------------------------------


# The train step by the graph executor in the default tier; by XLA in the slow tier (the
# XLA step's finite losses and its agreement with the graph executor's stay in the default
# tier: test_steps.py).
@pytest.fixture(scope="module",
                params=["graph", pytest.param("xla", marks=pytest.mark.slow)])  # fmt: skip
def overfit_losses(request):
    """Losses of 30 compiled Adam steps on one fixed batch (`MICRO`: overfitting one batch
    needs neither depth nor width), by the graph executor or XLA."""
    model = tiny_model(**MICRO)
    batch = make_batch(model.config)
    model(batch)
    optimizer = keras.optimizers.Adam(3e-3)
    # Its slots made here: created inside the step, they would trace it twice.
    optimizer.build(model.trainable_variables)
    signature = {k: tf.TensorSpec(v.shape, v.dtype) for k, v in batch.items()}

    @tf.function(input_signature=[signature], jit_compile=request.param == "xla", autograph=False)
    def train_step(batch):
        with tf.GradientTape() as tape:
            losses = total_loss(model(batch, training=True), batch)
        grads = tape.gradient(losses["loss"], model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return losses

    return [{k: v.numpy() for k, v in train_step(batch).items()} for _ in range(30)]


def test_compiled_train_step_gives_finite_float32_losses(overfit_losses):
    for losses in overfit_losses[:2]:
        assert set(losses) == {"loss", "mel_before", "mel_after", "stop", "guided_attention",
                               "alignment"}  # fmt: skip
        assert all(v.dtype == np.float32 and v.shape == () for v in losses.values())
        assert all(np.isfinite(v) for v in losses.values())


def test_overfits_one_batch(overfit_losses):
    first = overfit_losses[0]["loss"]
    last = np.mean([losses["loss"] for losses in overfit_losses[-3:]])
    assert last < 0.5 * first


@pytest.fixture(scope="module")
def decoders():
    """`decoders(max_frames, compiler, **model)`: (model, its `make_batch`, the decoding's
    inputs, the decoding of `max_frames` frames: eager with compiler None, else a
    `tf.function`, by XLA or not), built at its first use and shared by the module's tests.
    Each test sets the stop bias it decodes with. An XLA compile of the decoding costs
    10-15 s on two cores: the default tier's XLA tests decode with one (`SHARED_XLA`)."""
    built = {}

    def get(max_frames: int, compiler: str | None, **overrides):
        key = (max_frames, compiler, *sorted(overrides.items()))
        if key not in built:
            model = tiny_model(**overrides)
            batch = make_batch(model.config)
            model(batch)
            args = [batch[k] for k in ("tokens", "token_mask", "cond_mel", "cond_lengths")]

            def decode(*inputs):
                return infer(model, *inputs, max_frames=max_frames)

            if compiler is not None:
                decode = tf.function(decode, jit_compile=compiler == "xla", autograph=False)
            built[key] = model, batch, args, decode
        return built[key]

    return get


# The XLA decoding of the default tier's compiled tests: r = 2 (a decoder step writes
# two frames), the voice's pitch and statistics, no prenet dropout (teacher forcing must
# draw what decoding drew), a buffer of 41 frames (not a multiple of r).
SHARED_XLA = (41, "xla", dict(**DETERMINISTIC, **VOICE_PITCH, reduction_factor=2))
# The same tests on the models they were written for (r = 1, 3; prenet dropout on; no
# voice): each of their properties is asserted on `SHARED_XLA` in the default tier.
ONE_FRAME_XLA = (8, "xla", {})
THREE_FRAMES_XLA = (10, "xla", dict(reduction_factor=3))


@pytest.mark.parametrize("decoder", [
    pytest.param(SHARED_XLA, id="shared"),
    pytest.param(ONE_FRAME_XLA, id="r1", marks=pytest.mark.slow),
])  # fmt: skip
def test_infer_under_jit_compile(decoders, decoder):
    max_frames, compiler, overrides = decoder
    model, _, args, compiled = decoders(max_frames, compiler, **overrides)
    r = model.config.reduction_factor
    results = {}
    for stop_bias in (-20.0, 0.0, 20.0):  # same compiled function, other weights
        model.stop_head.bias.assign([stop_bias] * r)
        results[stop_bias] = {k: v.numpy() for k, v in compiled(*args).items()}
    for result in results.values():
        assert result["mel"].shape == result["mel_before"].shape == (2, max_frames, 80)
        assert result["stop_probs"].shape == (2, max_frames)
        assert result["lengths"].dtype == np.int32
        assert ((result["lengths"] >= 1) & (result["lengths"] <= max_frames)).all()
        assert np.isfinite(result["mel"]).all()
        assert result["attention"].shape == (2, max_frames, 8)  # (B, max_frames, T)
        assert (result["attention"][1, :, 5:] == 0).all()  # row 1 has 5 real tokens
    assert results[-20.0]["lengths"].tolist() == [max_frames] * 2  # never stops: the buffer
    assert results[20.0]["lengths"].tolist() == [1, 1]  # stops at once: the loop ends
    # after its first step, which wrote r frames
    assert (results[20.0]["stop_probs"][:, r:] == 0).all()
    assert (results[20.0]["attention"][:, r:] == 0).all()  # no frame after the loop
    assert (results[-20.0]["attention"].sum(axis=2) > 0).all()  # every frame attended


def test_decoding_is_deterministic_though_training_keeps_the_prenet_dropout():
    model, decode = tiny_model(**ONE_LAYER), DecodeConfig()
    assert model.config.prenet_dropout > 0
    batch = make_batch(model.config)
    model(batch)
    model.stop_head.bias.assign([-20.0] * model.config.reduction_factor)  # the whole buffer
    args = [batch[k] for k in ("tokens", "token_mask", "cond_mel", "cond_lengths")]
    first, second = (infer(model, *args, max_frames=6, decode=decode)["mel"].numpy()
                     for _ in range(2))  # fmt: skip
    np.testing.assert_array_equal(first, second)


# One XLA case in the default tier, `SHARED_XLA`'s decoding (one compile for every XLA
# test of decoding): it has each setting of the two XLA cases this test was written with
# (r = 2; the voice's pitch, which brings its statistics), which run in the slow tier. The
# eager and graph cases cover each r and voice setting.
@pytest.mark.parametrize(
    ("r", "max_frames", "compiler", "voice"),
    [(1, 6, None, {}), (1, 6, None, VOICE_PITCH), (3, 7, None, VOICE_STATS),
     (2, 6, None, VOICE_PITCH), (2, 41, "graph", {}), (2, 41, "xla", VOICE_PITCH),
     (1, 6, None, RELATIVE), (2, 41, "graph", RELATIVE),
     pytest.param(1, 40, "xla", VOICE_PITCH, marks=pytest.mark.slow),
     pytest.param(2, 41, "xla", VOICE_STATS, marks=pytest.mark.slow),
     pytest.param(2, 41, "xla", RELATIVE, marks=pytest.mark.slow)],
)  # fmt: skip
def test_infer_matches_teacher_forcing_on_its_own_frames(decoders, r, max_frames, compiler,
                                                         voice):  # fmt: skip
    # Each decoding step reads its past from the blocks' key/value caches; teacher forcing
    # runs the decoder over the whole buffer at once (as decoding did before the caches).
    model, batch, args, decode = decoders(max_frames, compiler, **DETERMINISTIC,
                                          **voice, reduction_factor=r)  # fmt: skip
    model.stop_head.bias.assign([-20.0] * r)  # generate the whole buffer
    if model.decoder.aligner is not None:  # the symbols-left vectors start at zeros
        ending = model.decoder.aligner.ending
        ending.assign(np.random.default_rng(0).normal(size=ending.shape))
    generated = decode(*args)
    assert generated["mel"].shape == (2, max_frames, 80)  # exactly the requested frames
    mask = tf.sequence_mask(generated["lengths"], max_frames, tf.float32)
    forced = model({**batch, "mel": generated["mel_before"], "mel_mask": mask})
    np.testing.assert_allclose(forced["mel_before"], generated["mel_before"], atol=1e-4)
    np.testing.assert_allclose(forced["mel_after"], generated["mel"], atol=1e-4)
    np.testing.assert_allclose(
        tf.sigmoid(forced["stop_logits"]), generated["stop_probs"], atol=1e-6
    )
    # One decoder for both: the attention of each generated frame is teacher forcing's.
    np.testing.assert_allclose(forced["attention"], generated["attention"], atol=1e-5)


@pytest.mark.parametrize("decoder", [
    pytest.param(SHARED_XLA, id="shared"),
    pytest.param(THREE_FRAMES_XLA, id="r3", marks=pytest.mark.slow),
])  # fmt: skip
def test_a_reduction_factor_writes_exactly_the_requested_frames_and_stop_positions(
    decoders, decoder
):
    max_frames, compiler, overrides = decoder
    model, _, args, compiled = decoders(max_frames, compiler, **overrides)
    r = model.config.reduction_factor
    assert r > 1
    batch = make_batch(model.config, frames=13)  # not a multiple of r: 13 and 8 real frames
    outputs = model(batch)
    assert outputs["mel_after"].shape == (2, 13, 80)
    assert outputs["stop_logits"].shape == (2, 13)
    assert outputs["attention"].shape == (2, 13, 8)
    # one attention row per decoder step, shared by the r frames it writes
    np.testing.assert_array_equal(outputs["attention"][:, 0], outputs["attention"][:, r - 1])
    for position in (0, r - 1, None):  # the stop token fires first at this frame, or never
        bias = np.full(r, -20.0)
        if position is not None:
            bias[position] = 20.0
        model.stop_head.bias.assign(bias)
        result = compiled(*args)
        probs = result["stop_probs"].numpy()
        assert result["mel"].shape == (2, max_frames, 80)
        assert probs.shape == (2, max_frames)
        if position is None:
            assert result["lengths"].numpy().tolist() == [max_frames] * 2  # the whole buffer
            assert (result["attention"].numpy().sum(axis=2) > 0).all()  # every frame decoded
            continue
        assert result["lengths"].numpy().tolist() == [position + 1] * 2
        assert (probs[:, :position] < 0.5).all()
        assert (probs[:, position] > 0.5).all()
        assert (probs[:, r:] == 0).all()  # one step ran: it wrote r frames, no more
        assert (result["attention"].numpy()[:, r:] == 0).all()
    assert compiled.experimental_get_tracing_count() == 1  # decoding stays one program


def test_the_inference_window_keeps_decoding_monotonic():
    # The content model's window (the relative one's position is monotonic itself).
    model = tiny_model(alignment="content")
    window = DecodeConfig(window_back=1, window_ahead=2)
    batch = make_batch(model.config, text_len=12)
    model(batch)
    model.stop_head.bias.assign([-20.0])  # generate the whole buffer
    args = [batch[k] for k in ("tokens", "token_mask", "cond_mel", "cond_lengths")]
    attention = infer(model, *args, max_frames=10, decode=window)["attention"].numpy()  # (B, F, T)
    for row in attention:
        focus = 0
        for t, weights in enumerate(row):
            allowed = np.zeros(12, bool)
            allowed[max(focus - 1, 0) : focus + 3] = True
            assert (weights[~allowed] == 0).all(), (t, focus, weights)
            assert weights.sum() > 0
            focus = max(focus, int(weights.argmax()))


@pytest.mark.parametrize("max_frames", [0, 2.5, True])
def test_infer_rejects_bad_max_frames(max_frames):
    model = tiny_model()
    batch = make_batch(model.config)
    args = [batch[k] for k in ("tokens", "token_mask", "cond_mel", "cond_lengths")]
    with pytest.raises(ConfigError, match="max_frames"):
        infer(model, *args, max_frames=max_frames)


@pytest.fixture
def mixed_float16():
    keras.mixed_precision.set_global_policy("mixed_float16")
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("overrides", [{}, RELATIVE], ids=["content", "relative"])
def test_a_checkpoint_of_the_model_alone_holds_every_weight(tmp_path, overrides):
    # Keras 3 does not make list-held sublayers checkpoint children; `LazyLayer` does.
    model = tiny_model(**overrides)
    config = model.config
    model(make_batch(config))
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    keys = [k for k in tf.train.list_variables(path) if k[0].startswith("model/")]
    assert len(keys) == len(model.weights)
    keras.utils.set_random_seed(1)
    fresh = TextToMel(config)
    fresh(make_batch(config))
    tf.train.Checkpoint(model=fresh).restore(path).assert_existing_objects_matched()
    for mine, restored in zip(model.get_weights(), fresh.get_weights(), strict=True):
        np.testing.assert_array_equal(mine, restored)


@pytest.mark.usefixtures("mixed_float16")
@pytest.mark.parametrize("overrides", [{}, RELATIVE], ids=["content", "relative"])
def test_mixed_precision_forward_gives_float32_outputs_and_losses(overrides):
    model = tiny_model(**overrides)
    batch = make_batch(model.config)
    outputs = model(batch, training=True)
    assert model.decoder.blocks[0].ff_in.compute_dtype == "float16"
    assert all(v.dtype == tf.float32 for v in outputs.values())
    losses = total_loss(outputs, batch)
    assert all(v.dtype == tf.float32 and np.isfinite(v.numpy()) for v in losses.values())
