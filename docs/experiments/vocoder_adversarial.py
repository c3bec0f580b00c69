"""The adversarial stage, tried at equal CPU time against reconstruction alone (issue 28).

Continues a trained vocoder run (reconstruction losses only) for a fixed number of steps in
one of two arms and writes checkpoints into a copy of the run, which `xtts-bench vocoder`
then scores (PESQ, STOI, log-mel distance):

- `recon`: the run's own losses (log-mel L1 x `mel_weight` + multi-resolution STFT);
- `gan`: the same plus Vocos's multi-period discriminator (periods 2, 3, 5, 7, 11; conv
  channels `--mpd-channels`), hinge losses and feature matching (x 2), generator and
  discriminator updated together from one forward pass; `--mrd-channels N` adds the
  multi-resolution discriminator (weight 0.1, as Vocos).

Both arms: AdamW 2e-4 (betas 0.8, 0.9), gradients clipped at norm 1, one thread, so the two
arms run side by side on two cores. A scratch experiment, not part of the trainer: its
figures are in docs/train/vocoder.md ("The adversarial stage, tried at equal CPU time"),
with the commands.

usage: python docs/experiments/vocoder_adversarial.py {recon,gan} STEPS OUT_RUN
           --base VOCODER_RUN --data AUDIO_CACHE [--time]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

import keras
import tensorflow as tf

import xtts_data as xd
from xtts_audio import MelConfig, stft
from xtts_train.models.vocoder.losses import vocoder_losses
from xtts_train.runs.loading import latest_step, load_vocoder

_MRD_WEIGHT = 0.1  # Vocos's mrd_loss_coeff
_FM_WEIGHT = 2.0
_RESOLUTIONS = ((512, 128, 512), (1024, 256, 1024), (2048, 512, 2048))


def _lrelu(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.leaky_relu(x, 0.1)


def _convolve(convs, post, x: tf.Tensor):
    """A discriminator's conv stack: (score, every layer's output)."""
    features = []
    for conv in convs:
        x = _lrelu(conv(x))
        features.append(x)
    x = post(x)
    return x, [*features, x]


class PeriodDiscriminator(keras.layers.Layer):
    """HiFi-GAN's sub-discriminator of one period: (B, S) → score, feature maps."""

    def __init__(self, period: int, channels: tuple[int, ...], **kwargs) -> None:
        super().__init__(**kwargs)
        self.period = period
        self.convs = [keras.layers.Conv2D(c, (5, 1), strides=(3, 1), padding="same")
                      for c in channels]  # fmt: skip
        self.convs.append(keras.layers.Conv2D(channels[-1], (5, 1), padding="same"))
        self.post = keras.layers.Conv2D(1, (3, 1), padding="same")

    def call(self, x: tf.Tensor):
        batch, samples = x.shape
        pad = (-samples) % self.period
        x = tf.pad(x, [[0, 0], [0, pad]], mode="REFLECT")
        x = tf.reshape(x, [batch, (samples + pad) // self.period, self.period, 1])
        return _convolve(self.convs, self.post, x)


class ResolutionDiscriminator(keras.layers.Layer):
    """UnivNet/Vocos's sub-discriminator of one STFT resolution (its magnitude)."""

    def __init__(self, resolution: tuple[int, int, int], channels: int, **kwargs) -> None:
        super().__init__(**kwargs)
        n_fft, hop, window = resolution
        self.recipe = MelConfig(sample_rate=22050, n_fft=n_fft, hop_length=hop,
                                win_length=window, n_mels=1, center=True,
                                pad_mode="constant")  # fmt: skip
        self.convs = [keras.layers.Conv2D(channels, (3, 9), padding="same")]
        self.convs += [keras.layers.Conv2D(channels, (3, 9), strides=(1, 2), padding="same")
                       for _ in range(3)]  # fmt: skip
        self.convs.append(keras.layers.Conv2D(channels, (3, 3), padding="same"))
        self.post = keras.layers.Conv2D(1, (3, 3), padding="same")

    def call(self, x: tf.Tensor):
        x = tf.abs(stft(x, self.recipe))[..., None]  # (B, T, bins, 1)
        return _convolve(self.convs, self.post, x)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("arm", choices=["recon", "gan"])
    parser.add_argument("steps", type=int, help="steps to add to the base run's")
    parser.add_argument("out", help="the run folder to write (a copy of --base's config)")
    parser.add_argument("--base", required=True, help="the vocoder run to continue")
    parser.add_argument("--data", required=True, help="its cache, built with waveforms")
    parser.add_argument("--mpd-channels", default="8,16,32,64")
    parser.add_argument("--mrd-channels", type=int, default=0, help="0: no MRD")
    parser.add_argument("--graph", action="store_true", help="no XLA")
    parser.add_argument("--time", action="store_true", help="time 20 steps and stop")
    return parser


def main() -> None:
    args = _parser().parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    stack, generator = load_vocoder(args.base)
    start = latest_step(args.base)
    batches = iter(xd.make_segment_dataset(args.data, stack.data, "train", repeat=True).dataset)
    channels = tuple(int(c) for c in args.mpd_channels.split(","))
    discriminators = [PeriodDiscriminator(p, channels) for p in (2, 3, 5, 7, 11)]
    weights = [1.0] * 5
    if args.mrd_channels:
        discriminators += [ResolutionDiscriminator(r, args.mrd_channels) for r in _RESOLUTIONS]
        weights += [_MRD_WEIGHT] * 3
    g_opt = keras.optimizers.AdamW(2e-4, beta_1=0.8, beta_2=0.9, weight_decay=0.01)
    d_opt = keras.optimizers.AdamW(2e-4, beta_1=0.8, beta_2=0.9, weight_decay=0.01)

    def apply(optimizer, loss_grads, variables):
        grads, _ = tf.clip_by_global_norm(loss_grads, 1.0)
        optimizer.apply_gradients(zip(grads, variables, strict=True))

    @tf.function(jit_compile=not args.graph)
    def step_recon(mel, audio):
        with tf.GradientTape() as tape:
            losses = vocoder_losses(generator(mel, training=True), audio, stack.audio,
                                    stack.vocoder)  # fmt: skip
        apply(g_opt, tape.gradient(losses["loss"], generator.trainable_weights),
              generator.trainable_weights)  # fmt: skip
        return losses

    @tf.function(jit_compile=not args.graph)
    def step_gan(mel, audio):
        d_vars = [v for d in discriminators for v in d.trainable_weights]
        n = audio.shape[0]
        with tf.GradientTape(persistent=True) as tape:
            pred = generator(mel, training=True)
            losses = vocoder_losses(pred, audio, stack.audio, stack.vocoder)
            adv = fm = d_loss = 0.0
            for weight, disc in zip(weights, discriminators, strict=True):
                score, features = disc(tf.concat([audio, pred], axis=0))  # real, then fake
                real, fake = score[:n], score[n:]
                d_loss += weight * (tf.reduce_mean(tf.nn.relu(1 - real))
                                    + tf.reduce_mean(tf.nn.relu(1 + fake)))  # fmt: skip
                adv += weight * tf.reduce_mean(tf.nn.relu(1 - fake))
                matched = [tf.reduce_mean(tf.abs(tf.stop_gradient(f[:n]) - f[n:]))
                           for f in features]  # fmt: skip
                fm += weight * tf.add_n(matched) / len(matched)
            adv, fm = adv / len(discriminators), fm / len(discriminators)
            total = losses["loss"] + adv + _FM_WEIGHT * fm
        apply(g_opt, tape.gradient(total, generator.trainable_weights),
              generator.trainable_weights)  # fmt: skip
        apply(d_opt, tape.gradient(d_loss, d_vars), d_vars)
        return {**losses, "adv": adv, "fm": fm, "d": d_loss}

    first = next(batches)
    for disc in discriminators:
        disc(first["audio"])
    step = step_gan if args.arm == "gan" else step_recon
    step(first["mel"], first["audio"])  # compile
    if args.time:
        began = time.perf_counter()
        for _ in range(20):
            batch = next(batches)
            step(batch["mel"], batch["audio"])
        print(f"{args.arm}: {(time.perf_counter() - began) / 20 * 1000:.0f} ms a step")
        return
    shutil.rmtree(args.out, ignore_errors=True)
    shutil.copytree(args.base, args.out, ignore=shutil.ignore_patterns(
        "checkpoints", "tensorboard", "metrics.jsonl"))  # fmt: skip
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=generator),
                                         os.path.join(args.out, "checkpoints"),
                                         max_to_keep=10, checkpoint_name="ckpt")  # fmt: skip
    began = time.process_time()
    with open(os.path.join(args.out, "experiment.jsonl"), "w") as log:
        for i in range(1, args.steps + 1):
            batch = next(batches)
            losses = step(batch["mel"], batch["audio"])
            if i % 200 == 0:
                record = {k: float(v) for k, v in losses.items()}
                record.update(step=start + i, cpu_s=time.process_time() - began)
                log.write(json.dumps(record) + "\n")
                log.flush()
            if i % 2000 == 0 or i == args.steps:
                manager.save(checkpoint_number=start + i)


if __name__ == "__main__":
    main()
