"""The suggestion gate's pure parts: which threshold is in force, and what counts as below it."""

from __future__ import annotations

import json

import pytest

from dgemma_lsp.backend.contract import Done, Stats
from dgemma_lsp.backend.model_card import read_card
from dgemma_lsp.config import ConfigError, Settings
from dgemma_lsp.lsp.confidence import DEFAULT_STEPS, below, completion_steps, temperatures, threshold


class _Backend:  # only the attribute the gate reads (a real backend sets it from the checkpoint's card)
    def __init__(self, gate: float | None, temps: tuple[float, float] | None = None) -> None:
        self.recommended = {} if gate is None else {"min_confidence": gate}
        if temps:
            self.recommended.update(t_min=temps[0], t_max=temps[1])


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


def test_temperatures_setting_then_card_then_transformers_defaults() -> None:
    assert temperatures(Settings(), _Backend(None)) == (0.4, 0.8)
    assert temperatures(Settings(), _Wrapper(_Backend(0.05, (0.1, 0.3)))) == (0.1, 0.3)
    mine, _ = Settings().merged({"tMin": 0.2, "tMax": 0.6})
    assert temperatures(mine, _Backend(0.05, (0.1, 0.3))) == (0.2, 0.6)
    with pytest.raises(ConfigError, match="set t_min and t_max together"):
        Settings().merged({"t_min": 0.2})
    with pytest.raises(ConfigError, match="0 <= t_min < t_max"):
        Settings().merged({"t_min": 0.6, "t_max": 0.2})


def test_model_card(tmp_path) -> None:
    assert read_card(tmp_path) == {}  # no card
    card = tmp_path / "dgemma_lsp.json"
    card.write_text(json.dumps({"min_confidence": 0.05}))
    assert read_card(tmp_path) == {"min_confidence": 0.05}
    for bad in ("{", json.dumps({"min_confidence": "high"}), json.dumps({"min_confidence": 2}), json.dumps([1])):
        card.write_text(bad)
        assert "min_confidence" not in read_card(tmp_path)
    card.write_text(json.dumps({"t_min": 0.1, "t_max": 0.3, "why": "text"}))
    assert read_card(tmp_path) == {"t_min": 0.1, "t_max": 0.3}
    card.write_text(json.dumps({"t_min": 0.5, "t_max": 0.3, "min_confidence": True}))  # unusable: dropped
    assert read_card(tmp_path) == {}


def test_the_shipped_small_model_recommends_a_gate_and_cool_sampling() -> None:
    from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR

    card = json.loads((SMALL_MODEL_DIR / "dgemma_lsp.json").read_text())
    steps = json.loads((SMALL_MODEL_DIR / "generation_config.json").read_text())["max_denoising_steps"]
    rec = read_card(SMALL_MODEL_DIR)
    assert rec == {k: card[k] for k in ("min_confidence", "t_min", "t_max")} | {"denoising_steps": steps}
    assert 0 < rec["min_confidence"] < 1 and rec["t_max"] <= 0.3  # a gate and cool sampling, whichever checkpoint


def test_a_carded_checkpoint_recommends_its_generation_config_steps(tmp_path) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps({"max_denoising_steps": 6}))
    assert read_card(tmp_path) == {}  # no card: a foreign checkpoint's steps (the 26B's 48) are not ours to use
    (tmp_path / "dgemma_lsp.json").write_text(json.dumps({"min_confidence": 0.2}))
    assert read_card(tmp_path) == {"min_confidence": 0.2, "denoising_steps": 6}
    backend = _Backend(0.2)
    backend.recommended.update(read_card(tmp_path))
    assert completion_steps(Settings(), backend) == 6
    mine, _ = Settings().merged({"denoisingSteps": 12})
    assert completion_steps(mine, backend) == 12  # a changed setting wins
    assert completion_steps(Settings(), _Backend(None)) == 16 == Settings().denoising_steps == DEFAULT_STEPS
