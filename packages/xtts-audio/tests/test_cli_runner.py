"""`run_command`, every CLI's error handler: a user error is one line and exit 2, a bug keeps
its traceback, and an error raised while AutoGraph traces (or in a Keras layer's call) shows
only its own message."""

from __future__ import annotations

import argparse
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import xtts_audio
from xtts_audio.cli_runner import run_command, user_message
from xtts_audio.errors import ConfigError, InputError, XttsAudioError

ARGS = argparse.Namespace(command="demo")
MESSAGE = "MelConfig.n_mels: expected >= 1, received: n_mels=0"


def _run(command) -> int:
    return run_command(command, ARGS, prog="xtts-x", user_errors=(XttsAudioError, OSError))


def _raise(error: Exception):
    def command(args: argparse.Namespace) -> int:
        raise error

    return command


@pytest.mark.parametrize("code", [0, 1])
def test_the_command_s_exit_code_is_returned(code, capsys):
    assert _run(lambda args: code) == code
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "error", [ConfigError(MESSAGE), XttsAudioError(MESSAGE), FileNotFoundError(MESSAGE)]
)
def test_a_user_error_is_one_line_and_exit_2(error, capsys):
    assert _run(_raise(error)) == 2
    captured = capsys.readouterr()
    assert captured.err == f"xtts-x demo: error: {MESSAGE}\n"
    assert captured.out == ""


@pytest.mark.parametrize("error", [ValueError("a bug"), KeyError("a bug"), RuntimeError("a bug")])
def test_a_bug_keeps_its_traceback(error, capsys):
    # ConfigError is a ValueError, yet a plain ValueError is not the user's to fix.
    with pytest.raises(type(error), match="a bug") as raised:
        _run(_raise(error))
    assert raised.value is error
    assert capsys.readouterr().err == ""


def _helper(x: tf.Tensor) -> tf.Tensor:
    if x.shape[0] > 2:  # a check at trace time, in a function AutoGraph converts
        raise ConfigError(MESSAGE)
    return x


@tf.function
def _inner(x: tf.Tensor) -> tf.Tensor:
    return _helper(x) * 2.0


# Each raises ConfigError(MESSAGE) while AutoGraph converts and traces it.
TRACED = {
    "raised in the function": tf.function(_helper),
    "raised in a converted call": tf.function(lambda x: _helper(x) + 1.0),
    "through a nested tf.function": tf.function(lambda x: _inner(x) + 1.0),
    "under XLA": tf.function(lambda x: _helper(x) + 1.0, jit_compile=True),
}


@pytest.mark.parametrize("name", sorted(TRACED))
def test_an_error_raised_while_tracing_is_one_line_of_its_own_message(name, capsys):
    with pytest.raises(ConfigError) as raised:
        TRACED[name](tf.zeros([3]))
    assert "in user code:" in str(raised.value)  # what AutoGraph added
    assert user_message(raised.value) == MESSAGE

    assert _run(_raise(raised.value)) == 2
    assert capsys.readouterr().err == f"xtts-x demo: error: {MESSAGE}\n"


def test_an_error_raised_while_a_dataset_map_traces_is_its_own_message():
    with pytest.raises(ConfigError) as raised:
        tf.data.Dataset.range(3).map(lambda i: _helper(tf.zeros([3])))
    assert user_message(raised.value) == MESSAGE


def _keras_layer(call):
    keras = pytest.importorskip("keras")  # TensorFlow's own dependency; xtts-train's models

    class Layer(keras.layers.Layer):
        def call(self, x):
            return call(x)

    return Layer()


@pytest.mark.parametrize(
    "traced",
    [
        pytest.param(lambda: tf.function(_keras_layer(_helper)), id="a layer in a tf.function"),
        pytest.param(lambda: tf.function(_keras_layer(_inner)), id="a tf.function in a layer"),
        pytest.param(lambda: _keras_layer(tf.function(_keras_layer(_helper))), id="both twice"),
    ],
)
def test_keras_s_layer_call_wrapping_is_removed_too(traced):
    with pytest.raises(ConfigError) as raised:
        traced()(tf.zeros([3]))
    assert "Exception encountered when calling" in str(raised.value)
    assert user_message(raised.value) == MESSAGE


def test_a_library_op_s_error_reads_as_when_called_eagerly():
    config = xtts_audio.MelConfig.from_preset("xtts")
    waveform = tf.constant(np.zeros(4096, np.int32))
    with pytest.raises(InputError) as eager:
        xtts_audio.mel_spectrogram(waveform, config)
    with pytest.raises(InputError) as traced:
        tf.function(lambda w: xtts_audio.mel_spectrogram(w, config))(waveform)
    assert str(traced.value) != str(eager.value)
    assert user_message(traced.value) == user_message(eager.value) == str(eager.value)


def test_a_message_of_several_lines_keeps_them_without_autograph_s():
    message = "Expected a corpus folder,\nreceived: a file"
    with pytest.raises(ConfigError) as raised:
        tf.function(_raise(ConfigError(message)))(tf.zeros([1]))
    assert user_message(raised.value) == message


@pytest.mark.parametrize("message", [MESSAGE, "in user code:\n\nbut no frames", ""])
def test_a_message_nothing_wrapped_is_left_whole(message):
    assert user_message(ConfigError(message)) == message


def test_importing_the_runner_loads_no_tensorflow():
    code = "import sys, xtts_audio.cli_runner; assert 'tensorflow' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
