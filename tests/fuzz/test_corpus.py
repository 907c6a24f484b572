"""Every file of the fuzz corpus replays through its target in the live twin without a failure (docs/fuzzing.md).

`make test` runs this with the compiled twin and with the pure one: an input the fuzzer
once kept, or a crash added after its fix, stays clean in both.
"""

from __future__ import annotations

import importlib

import pytest

from . import CORPUS, TARGETS


def test_every_target_has_a_corpus():
    assert all(any((CORPUS / target).glob("seed-*")) for target in TARGETS)


@pytest.mark.parametrize("target", TARGETS)
def test_the_corpus_replays_clean(target):
    run = importlib.import_module(f"{__package__}.fuzz_{target}").TestOneInput
    failed = []
    for path in sorted((CORPUS / target).iterdir()):
        try:
            run(path.read_bytes())
        except Exception as error:  # noqa: BLE001 (any exception is the failure being looked for)
            failed.append(f"{path.name}: {type(error).__name__}: {error}"[:300])
    assert not failed, f"{len(failed)} of the {target} corpus fail:\n" + "\n".join(failed)


def test_a_failing_target_fails_the_replay(monkeypatch):
    """The replay reports what a target raises (it would pass vacuously otherwise)."""
    module = importlib.import_module(f"{__package__}.fuzz_jsonrpc")

    def broken(data: bytes) -> None:
        raise AssertionError("planted")

    monkeypatch.setattr(module, "TestOneInput", broken)
    with pytest.raises(AssertionError, match="planted"):
        test_the_corpus_replays_clean("jsonrpc")
