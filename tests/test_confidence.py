"""The suggestion gate's pure parts: which threshold is in force, and what counts as below it."""

from __future__ import annotations

import json

import pytest

from dgemma_lsp.backend.contract import Done, Stats
from dgemma_lsp.backend.model_card import recommended_min_confidence
from dgemma_lsp.config import ConfigError, Settings
from dgemma_lsp.lsp.confidence import below, threshold


class _Backend:  # only the attribute the gate reads (a real backend sets it from the checkpoint's card)
    def __init__(self, recommended: float | None) -> None:
        self.recommended_min_confidence = recommended


class _Wrapper:  # the server's fault-injection wrapper exposes the real backend as .inner
    def __init__(self, inner: _Backend) -> None:
        self.inner = inner


def _done(conf: float | None) -> Done:
    return Done("x = 1", Stats(extra={} if conf is None else {"confidence": conf}))


def test_setting_beats_the_model_card_and_no_card_means_off() -> None:
    unset = Settings()
    assert threshold(unset, _Backend(0.05)) == 0.05
    assert threshold(unset, _Wrapper(_Backend(0.05))) == 0.05
    assert threshold(unset, _Backend(None)) == 0.0
    shown_all, _ = Settings().merged({"minConfidence": 0})
    assert threshold(shown_all, _Backend(0.05)) == 0.0
    stricter, _ = Settings().merged({"min_confidence": 0.3})
    assert threshold(stricter, _Backend(None)) == 0.3


def test_below_withholds_only_reported_low_confidence() -> None:
    assert below(_done(0.01), 0.05) == 0.01
    assert below(_done(0.05), 0.05) is None  # at the threshold: shown
    assert below(_done(0.01), 0.0) is None  # gate off
    assert below(_done(None), 0.9) is None  # a backend that cannot tell (remote, vLLM) is never gated
    assert below(None, 0.9) is None


def test_min_confidence_out_of_range_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="min_confidence must be between 0 and 1"):
        Settings().merged({"minConfidence": 1.5})


def test_model_card(tmp_path) -> None:
    assert recommended_min_confidence(tmp_path) is None  # no card
    card = tmp_path / "dgemma_lsp.json"
    card.write_text(json.dumps({"min_confidence": 0.05}))
    assert recommended_min_confidence(tmp_path) == 0.05
    for bad in ("{", json.dumps({"min_confidence": "high"}), json.dumps({"min_confidence": 2}), json.dumps([1])):
        card.write_text(bad)
        assert recommended_min_confidence(tmp_path) is None


def test_the_shipped_small_model_recommends_a_gate() -> None:
    from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR

    assert recommended_min_confidence(SMALL_MODEL_DIR) == 0.05
