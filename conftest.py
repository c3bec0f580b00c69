"""Session settings for every test under this repository."""

import os

# Commands the tests start as subprocesses would otherwise use the user's persistent XLA
# compile cache (~/.cache/xtts/xla); tests of the cache point it at their own folder.
os.environ["XTTS_COMPILE_CACHE"] = "off"
