"""How every `xtts-*` console script runs its parsed command: a user error is one line.

`run_command` is the one error handler of the four CLIs: an error the user can fix (one of
the classes the CLI names: its package's base error and those of the packages it uses)
prints `PROG COMMAND: error: MESSAGE` on stderr and exits 2; anything else is a bug and
keeps its traceback. MESSAGE is the error's own, without the "in user code:" frames
AutoGraph adds while tracing or Keras's layer-call wrapping (`user_message`). `--verbose`
and what runs before TensorFlow starts are `xtts_audio.startup`'s (`verbose_flag`,
`start_cli`).

Standard library only: the CLIs import it before TensorFlow loads (and `--help` never
loads it).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["run_command", "user_message"]

# The text AutoGraph and Keras put around an error's message (see `user_message`).
_AUTOGRAPH = "in user code:\n\n"
_KERAS = re.compile(
    r"Exception encountered when calling [^\n]*\.\n\n\x1b\[1m(?P<message>.*?)\x1b\[0m\n\n"
    r"Arguments received by ",
    re.DOTALL,
)


def run_command(
    command: Callable[[argparse.Namespace], int],
    args: argparse.Namespace,
    *,
    prog: str,
    user_errors: tuple[type[Exception], ...],
) -> int:
    """Run `command(args)`; a user error becomes one line on stderr and exit code 2.

    Args:
        command: runs the parsed command, returns its exit code.
        args: the parsed arguments; `args.command` names the command in the message.
        prog: the console script, e.g. `"xtts-data"`.
        user_errors: the classes the user fixes (bad settings, paths, inputs). Any other
            exception, a `ValueError` from a bug included, propagates with its traceback.

    Returns:
        `command`'s exit code, or 2 after printing `PROG COMMAND: error: MESSAGE`.
    """
    try:
        return command(args)
    except user_errors as error:
        print(f"{prog} {args.command}: error: {user_message(error)}", file=sys.stderr)
        return 2


def user_message(error: BaseException) -> str:
    """`error`'s own message, without what AutoGraph and Keras wrapped around it.

    An error raised while AutoGraph converts a function (`tf.function` tracing, a
    `tf.data` map) is raised again as the same class with a new message (TensorFlow's
    `autograph/pyct/error_utils.py`, `ErrorMetadataBase.get_message`): "in user code:", a
    blank line, a `File "...", line N, in f` line and a source line per frame, a blank
    line, then the original `ClassName: message` indented by 4 spaces. A Keras layer whose
    `call` raised puts the message between "Exception encountered when calling NAME." and
    "Arguments received by NAME:" (keras `utils/traceback_utils.py`). Both can nest (a
    layer in a `tf.function`, a `tf.function` in a layer); every wrapping is removed.
    """
    message, name = str(error), type(error).__name__
    while True:
        if message.startswith(_AUTOGRAPH):
            cause = _autograph_cause(message)
            if cause is None:
                return message
            message = cause.removeprefix(f"{name}: ")
        elif found := _KERAS.match(message):
            message = found["message"]
        else:
            return message


def _autograph_cause(message: str) -> str | None:
    """The original `ClassName: message` in AutoGraph's text, None if it is not there."""
    lines = message.split("\n")
    if "" not in lines[2:]:
        return None
    first_blank = lines.index("", 2)  # frame lines are never empty: the message follows
    return "\n".join(line.removeprefix("    ") for line in lines[first_blank + 1 :]).rstrip("\n")
