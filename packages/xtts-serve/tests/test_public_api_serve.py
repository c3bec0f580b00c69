"""xtts_serve's public surface: every name of `__all__` resolves, and importing the
package (or its configs and errors) loads no TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import xtts_serve


def test_every_public_name_resolves_and_dir_lists_it():
    assert set(xtts_serve.__all__) <= set(dir(xtts_serve))
    for name in xtts_serve.__all__:
        assert getattr(xtts_serve, name) is not None, name


def test_the_package_and_its_configs_import_no_tensorflow():
    code = (
        "import sys, xtts_serve, xtts_serve.config, xtts_serve.errors\n"
        "xtts_serve.ServerConfig(max_queue=1)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"
