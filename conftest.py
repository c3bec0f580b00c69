"""Session settings for every test under this repository."""

import os

# Commands the tests start as subprocesses would otherwise use the user's persistent XLA
# compile cache (~/.cache/xtts/xla); tests of the cache point it at their own folder.
os.environ["XTTS_COMPILE_CACHE"] = "off"

# XLA without LLVM's backend optimizations, in this process and every process a test
# starts: the tests run each program for a few steps, so compiling is most of their time
# (a third less for the micro model's train step, measured). What a test checks holds at
# any level, and the compile cache keys its entries by XLA_FLAGS (`machine_key`), so no
# entry compiled at another level is ever read.
FAST_XLA = "--xla_backend_optimization_level=0"
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_XLA}".strip()
