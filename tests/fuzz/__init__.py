"""Coverage-guided fuzz targets of the core (docs/fuzzing.md): one module per target, each with `TestOneInput`.

`python -m tests.fuzz` runs them under atheris (`make fuzz`); test_corpus.py replays the
corpus of each through the live twin in the ordinary test run, without atheris.
"""

import sys
from pathlib import Path

# The targets drive the core as its tests do, with tests/core/fakes.py and tests/wire.py:
# pytest finds those folders for the tests, the fuzz runner needs them said.
_TESTS = Path(__file__).resolve().parent.parent
for _folder in (str(_TESTS), str(_TESTS / "core")):
    if _folder not in sys.path:
        sys.path.append(_folder)

TARGETS = ("http_reader", "websocket", "channel", "jsonrpc", "agent", "tokens")
CORPUS = Path(__file__).resolve().parent / "corpus"
