"""Vocoder, its inverse-STFT head and its losses: shapes, XLA, alignment, receptive field,
chunked inference, parameter counts and a training signal."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from xtts_audio import MelConfig, mel_features, stft
from xtts_train.config import VocoderConfig
from xtts_train.errors import ConfigError
from xtts_train.models.vocoder import (
    Vocoder,
    head_spectrum,
    receptive_frames,
    synthesis_config,
    synthesize,
    vocode_chunks,
    vocoder_losses,
)
from xtts_train.models.vocoder.layers import DepthwiseConv
from xtts_train.models.vocoder.losses import anti_wrap, phase_loss

AUDIO = MelConfig.from_preset("xtts")
HOP = AUDIO.hop_length

# Every `tf.function` here is traced without AutoGraph, as the packages' own are
# (tests/test_no_autograph.py): the traced code has no Python control flow on tensors, so
# AutoGraph's rewriting of each function it reaches would be seconds of each trace and
# nothing else (half the training step's trace below).


def sine(samples: int, hz: float = 220.0, amplitude: float = 0.5) -> np.ndarray:
    """float32 [samples] at the `xtts` recipe's rate."""
    t = np.arange(samples) / AUDIO.sample_rate
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def random_mel(frames: int, *, batch: int = 1, seed: int = 0) -> tf.Tensor:
    """Feature-scaled noise (the cache's `ln` mels sit around -11.5 .. 2)."""
    rng = np.random.default_rng(seed)
    return tf.constant(rng.uniform(-10.0, 1.0, (batch, frames, AUDIO.n_mels)), tf.float32)


@pytest.fixture(scope="module")
def config() -> VocoderConfig:
    return VocoderConfig.from_preset("tiny")


@pytest.fixture(scope="module")
def model(config) -> Vocoder:
    keras.utils.set_random_seed(0)
    model = Vocoder(config)
    model(random_mel(4))
    return model


@pytest.mark.parametrize("frames", [1, 3, 16])
def test_output_has_frames_times_hop_float32_samples(model, frames):
    audio = model(random_mel(frames, batch=2))
    assert audio.shape == (2, frames * HOP)
    assert audio.dtype == tf.float32
    assert np.isfinite(audio.numpy()).all()


def test_graph_and_xla_agree(model):
    mel = random_mel(12, batch=2)
    graph = tf.function(model, autograph=False)(mel)
    xla = tf.function(model, jit_compile=True, autograph=False)(mel)
    assert graph.shape == xla.shape == (2, 12 * HOP)
    np.testing.assert_allclose(xla.numpy(), graph.numpy(), atol=1e-5)
    np.testing.assert_allclose(model(mel).numpy(), graph.numpy(), atol=1e-5)


def test_depthwise_conv_under_xla_matches_the_native_kernel():
    # Under XLA the layer runs shifted multiply-adds instead of the grouped convolution.
    keras.utils.set_random_seed(0)
    layer = DepthwiseConv(7, padding="same")
    x = tf.random.normal([2, 11, 8])
    layer(x)

    def value_and_grads(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            total = tf.reduce_sum(y * tf.sin(y))
        return y, tape.gradient(total, [x, *layer.trainable_weights])

    graph = tf.function(value_and_grads, autograph=False)(x)
    xla = tf.function(value_and_grads, jit_compile=True, autograph=False)(x)
    for mine, native in zip(tf.nest.flatten(xla), tf.nest.flatten(graph), strict=True):
        np.testing.assert_allclose(mine.numpy(), native.numpy(), atol=1e-5)


def test_mixed_precision_output_is_float32(config):
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = Vocoder(config)
        audio = model(random_mel(6))
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert model.backbone.blocks[0].expand.compute_dtype == "bfloat16"
    assert audio.dtype == tf.float32
    assert np.isfinite(audio.numpy()).all()


@pytest.mark.parametrize("jit", [False, True])
def test_synthesis_inverts_the_analysis_stft(config, jit):
    # The head's spectrum of a recording's own STFT gives the recording back, edges included.
    wave = sine(20 * HOP + 37)
    spectrum = stft(wave[None], synthesis_config(config))  # (1, 21, 513): centred frames
    synthesis = tf.function(lambda s: synthesize(s, config), jit_compile=jit, autograph=False)
    audio = synthesis(spectrum)[0]
    assert audio.shape == (21 * HOP,)
    np.testing.assert_allclose(audio.numpy()[: wave.size], wave, atol=1e-5)


@pytest.mark.parametrize("frame", [0, 5, 9])
def test_synthesis_centres_frame_i_on_sample_i_times_hop(config, frame):
    # Frame `frame` holds an impulse at the middle of its window: (-1)^k is its spectrum.
    bins = config.frame_length // 2 + 1
    row = np.where(np.arange(bins) % 2, -1.0, 1.0)
    spectrum = np.zeros((1, 10, bins), np.complex64)
    spectrum[0, frame] = row
    audio = synthesize(tf.constant(spectrum), config)[0].numpy()
    assert int(np.argmax(np.abs(audio))) == frame * HOP
    assert np.abs(np.delete(audio, frame * HOP)).max() < 1e-6


def test_head_clips_the_magnitude_with_finite_gradients():
    logits = tf.constant([[[0.0, 500.0, 0.3, -2.0]]])  # 2 log-magnitudes, 2 phases
    with tf.GradientTape() as tape:
        tape.watch(logits)
        spectrum = head_spectrum(logits)
        total = tf.reduce_sum(tf.abs(spectrum))
    np.testing.assert_allclose(np.abs(spectrum.numpy()[0, 0]), [1.0, 100.0], rtol=1e-6)
    np.testing.assert_allclose(np.angle(spectrum.numpy()[0, 0]), [0.3, -2.0], rtol=1e-6)
    assert np.isfinite(tape.gradient(total, logits).numpy()).all()


def test_receptive_frames_formula(config):
    # 3 (embedding) + 4 blocks x 3 (kernel 7) + 2 (frames of 1024 samples, hop 256).
    assert receptive_frames(config) == 17
    wide = dataclasses.replace(config, kernel=9, n_fft=6 * HOP)
    assert receptive_frames(wide) == 3 + 4 * 4 + 3


def test_a_frame_beyond_the_receptive_field_changes_no_sample(model):
    frames, changed_frame = 60, 30
    mel = random_mel(frames).numpy()
    other = mel.copy()
    other[0, changed_frame] += 3.0
    diff = np.abs(model(other).numpy() - model(mel).numpy())[0].reshape(frames, HOP)
    touched = np.flatnonzero(diff.max(axis=1) > 0)  # output frames that changed
    reach = model.receptive_frames
    assert touched.max() <= changed_frame + reach
    assert touched.min() == changed_frame - reach  # within the bound, and tight on this side


@pytest.mark.parametrize(("chunk", "context"), [(16, 17), (7, 20), (50, 17)])
def test_chunked_vocoding_equals_the_whole(model, chunk, context):
    mel = random_mel(70)
    whole = model(mel).numpy()
    chunked = vocode_chunks(model, mel, chunk_frames=chunk, context_frames=context).numpy()
    assert chunked.shape == whole.shape == (1, 70 * HOP)
    # Float rounding only: the windows differ in length, so sums run in other orders.
    rms = np.sqrt(np.mean(whole**2))
    assert np.abs(chunked - whole).max() <= 1e-4 * rms


def test_chunks_without_enough_context_differ(model):
    mel = random_mel(70)
    chunked = vocode_chunks(model, mel, chunk_frames=16, context_frames=2).numpy()
    whole = model(mel).numpy()
    assert np.abs(chunked - whole).max() > 1e-3 * np.sqrt(np.mean(whole**2))


# Trainable parameters with 80 mels and hop 256 (frames of 1024: a head of 2 x 513).
PARAMETERS = {"tiny": 605_570, "small": 3_584_770, "base": 13_459_970}


@pytest.mark.parametrize("preset", sorted(PARAMETERS))
def test_preset_parameter_counts(preset):
    model = Vocoder(VocoderConfig.from_preset(preset, n_mels=80, hop_length=256))
    assert model.parameter_count() == PARAMETERS[preset]


def test_a_checkpoint_of_the_model_holds_every_weight(model, tmp_path):
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    keys = [k for k, _ in tf.train.list_variables(path) if k.startswith("model/")]
    assert len(keys) == len(model.weights)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (dict(kernel=6), "kernel"),
        (dict(n_fft=1000), "n_fft"),
        (dict(layers=0), "layers"),
    ],
)
def test_bad_config_raises(overrides, match):
    with pytest.raises(ConfigError, match=match):
        VocoderConfig.from_preset("tiny", **overrides)


def test_frames_that_do_not_overlap_are_refused(config):
    with pytest.raises(ConfigError, match=r"n_fft: expected 0 or a multiple of hop_length=256, "
                       r"at least 512, received: n_fft=256"):  # fmt: skip
        dataclasses.replace(config, n_fft=HOP)


def test_bad_inputs_raise(model):
    with pytest.raises(ConfigError, match="n_mels=80"):
        model(tf.zeros([1, 4, 64]))
    with pytest.raises(ConfigError, match="chunk_frames an int >= 1"):
        vocode_chunks(model, random_mel(8), chunk_frames=0, context_frames=4)
    with pytest.raises(ConfigError, match="context_frames an int >= 0"):
        vocode_chunks(model, random_mel(8), chunk_frames=4, context_frames=-1)
    with pytest.raises(ConfigError, match="one shape"):
        vocoder_losses(tf.zeros([1, 512]), tf.zeros([1, 256]), AUDIO, model.config)
    with pytest.raises(ConfigError, match="stft_weight a number >= 0"):
        vocoder_losses(tf.zeros([1, 512]), tf.zeros([1, 512]), AUDIO, model.config,
                       stft_weight=-1.0)  # fmt: skip


def test_losses_vanish_for_identical_audio(config):
    wave = tf.constant(np.stack([sine(16 * HOP), sine(16 * HOP, hz=330.0)]))
    losses = vocoder_losses(wave, wave, AUDIO, config)
    assert set(losses) == {"loss", "mel_l1", "stft"}
    assert all(v.dtype == tf.float32 and v.shape == () for v in losses.values())
    assert losses["mel_l1"].numpy() == 0.0
    assert 0.0 <= losses["stft"].numpy() < 1e-6


def test_losses_are_positive_for_different_audio_and_agree_under_xla(config):
    true = tf.constant(sine(16 * HOP)[None])
    pred = tf.constant(sine(16 * HOP, hz=233.0)[None])

    def losses(p, t):
        return vocoder_losses(p, t, AUDIO, config)

    graph = tf.function(losses, autograph=False)(pred, true)
    xla = tf.function(losses, jit_compile=True, autograph=False)(pred, true)
    assert graph["mel_l1"] > 0.1
    assert graph["stft"] > 0.1
    expected = config.mel_weight * graph["mel_l1"] + config.stft_weight * graph["stft"]
    np.testing.assert_allclose(graph["loss"], expected, rtol=1e-6)
    for name in graph:
        np.testing.assert_allclose(xla[name], graph[name], rtol=1e-4)
    weighted = vocoder_losses(pred, true, AUDIO, config, mel_weight=tf.constant(2.0),
                              stft_weight=0.5)  # fmt: skip
    expected = 2.0 * weighted["mel_l1"] + 0.5 * weighted["stft"]
    np.testing.assert_allclose(weighted["loss"], expected, rtol=1e-6)


def _true_phase(wave: tf.Tensor, config: VocoderConfig) -> tf.Tensor:
    frames = wave.shape[1] // HOP
    return tf.math.angle(stft(wave, synthesis_config(config)))[:, :frames]  # (B, F, bins)


def test_anti_wrap_is_the_distance_between_phases():
    x = tf.constant([0.0, 0.5, -0.5, 2 * np.pi - 0.5, 3 * np.pi, -7 * np.pi / 2])
    np.testing.assert_allclose(anti_wrap(x), [0, 0.5, 0.5, 0.5, np.pi, np.pi / 2], atol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_phase_loss_vanishes_for_the_recordings_phase_up_to_whole_turns(config, jit):
    wave = tf.constant(np.stack([sine(16 * HOP), sine(16 * HOP, hz=330.0)]))
    true = _true_phase(wave, config)
    loss = tf.function(lambda p, w: phase_loss(p, w, config), jit_compile=jit, autograph=False)
    assert float(loss(true, wave)) < 1e-4
    turns = np.random.default_rng(0).integers(-3, 4, true.shape) * 2 * np.pi
    assert float(loss(true + turns, wave)) < 1e-3  # a whole turn is no error
    shifted = float(loss(true + 0.5, wave))  # a constant offset: the phase term only
    assert shifted == pytest.approx(0.5, abs=1e-3)
    noise = np.random.default_rng(1).uniform(-np.pi, np.pi, true.shape)
    assert float(loss(tf.constant(noise, tf.float32), wave)) > 1.5  # ~ pi/2 per term


def test_phase_loss_joins_the_total_with_its_weight(model):
    mel, wave = random_mel(16), tf.constant(sine(16 * HOP)[None])
    out = model.synthesis(mel)
    np.testing.assert_array_equal(out["audio"], model(mel))
    losses = vocoder_losses(out["audio"], wave, AUDIO, model.config, phase_pred=out["phase"],
                            phase_weight=3.0)  # fmt: skip
    assert set(losses) == {"loss", "mel_l1", "stft", "phase"}
    expected = (model.config.mel_weight * losses["mel_l1"]
                + model.config.stft_weight * losses["stft"] + 3.0 * losses["phase"])  # fmt: skip
    np.testing.assert_allclose(losses["loss"], expected, rtol=1e-6)
    with tf.GradientTape() as tape:
        phase = phase_loss(model.synthesis(mel)["phase"], wave, model.config)
    grads = tape.gradient(phase, model.trainable_weights)
    assert all(np.isfinite(g.numpy()).all() for g in grads if g is not None)
    assert any(float(tf.reduce_sum(tf.abs(g))) > 0 for g in grads if g is not None)


@pytest.mark.parametrize("jit", [False, True])
def test_silent_target_gives_finite_losses_and_gradients(model, jit):
    mel = tf.constant(mel_features(tf.zeros([2, 8 * HOP]), AUDIO)[:, :8])  # (2, 8, 80)
    silence = tf.zeros([2, 8 * HOP])

    @tf.function(jit_compile=jit, autograph=False)
    def grads(mel, target):
        with tf.GradientTape() as tape:
            losses = vocoder_losses(model(mel), target, AUDIO, model.config)
        return losses, tape.gradient(losses["loss"], model.trainable_weights)

    losses, gradients = grads(mel, silence)
    assert all(np.isfinite(v.numpy()) for v in losses.values())
    assert all(np.isfinite(g.numpy()).all() for g in gradients)
    # Silence predicted for silence: the floors keep every square root and log finite.
    with tf.GradientTape() as tape:
        tape.watch(silence)
        loss = vocoder_losses(silence, silence, AUDIO, model.config)["loss"]
    assert np.isfinite(tape.gradient(loss, silence).numpy()).all()


def test_a_few_steps_fit_one_segment_of_a_sine():
    # A vocoder smaller than tiny: the training signal is the subject, not the preset (its
    # step traces in half the time).
    config = VocoderConfig.from_preset("tiny", dim=32, intermediate=64, layers=1)
    keras.utils.set_random_seed(0)
    model = Vocoder(config)
    wave = tf.constant(sine(17 * HOP)[None])
    mel = mel_features(wave, AUDIO)[:, :16]  # (1, 16, 80): frame i centred on sample i*hop
    target = wave[:, : 16 * HOP]
    model(mel)
    optimizer = keras.optimizers.Adam(2e-3)
    optimizer.build(model.trainable_weights)  # its slots made here: the step traces once

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            loss = vocoder_losses(model(mel), target, AUDIO, config)["loss"]
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
        return loss

    losses = [float(step()) for _ in range(60)]
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.5 * losses[0], losses[::10]
