"""Withholding suggestions the model itself is unsure of (``min_confidence``), and the other settings a
checkpoint may recommend for itself (the temperature schedule, the completion step count).

A backend that can read its own logits (the transformers backend) reports a suggestion's *confidence*: the
geometric mean probability that each canvas's first denoising step -- from pure noise, so from the prompt alone --
gave the tokens finally committed. (The last step's probabilities measure nothing: it sees its own canvas and
re-predicts it; the small model gives its noise 0.96 there.) An undertrained model (the embedded small one) makes
noise the prompt does not predict; showing it as ghost text would be worse than showing nothing.
``min_confidence`` unset means the serving model's own recommendation (a checkpoint may ship one in
``dgemma_lsp.json``; none means 0, i.e. every suggestion is shown); a backend that reports no confidence (remote
servers, vLLM) is never gated.
"""

from __future__ import annotations

from typing import Any

from dgemma_lsp.backend.contract import Done

DEFAULT_TEMPERATURES = (0.4, 0.8)  # transformers' DiffusionGemma generation defaults (t_min, t_max)


def recommended(backend: Any) -> dict[str, float]:
    """The serving checkpoint's recommendations (``backend/model_card.py``); {} when it has none."""
    inner = getattr(backend, "inner", backend)  # a wrapping backend (tests/support/lsp_launcher.py) exposes .inner
    rec = getattr(inner, "recommended", None)
    return rec if isinstance(rec, dict) else {}


def threshold(settings: Any, backend: Any) -> float:
    """The threshold in force: the setting when set, else what the serving model recommends, else 0 (off)."""
    chosen = getattr(settings, "min_confidence", None)
    if chosen is not None:
        return float(chosen)
    return float(recommended(backend).get("min_confidence") or 0.0)


def temperatures(settings: Any, backend: Any) -> tuple[float, float]:
    """The completion temperature schedule (t_min, t_max): the settings when set, else the model's
    recommendation, else transformers' defaults."""
    lo, hi = getattr(settings, "t_min", None), getattr(settings, "t_max", None)
    if lo is not None and hi is not None:
        return float(lo), float(hi)
    rec = recommended(backend)
    if "t_min" in rec and "t_max" in rec:
        return rec["t_min"], rec["t_max"]
    return DEFAULT_TEMPERATURES


def completion_steps(settings: Any, backend: Any) -> int:
    """Denoising steps per completion canvas: the setting when the user changed it from its default, else the
    model's recommendation (its generation_config.json, ``backend/model_card.py``), else the default."""
    chosen = int(getattr(settings, "denoising_steps", DEFAULT_STEPS))
    if chosen != DEFAULT_STEPS:
        return chosen
    return int(recommended(backend).get("denoising_steps") or chosen)


DEFAULT_STEPS = 16  # Settings.denoising_steps' default (tests/lsp/test_confidence.py checks): left so, the model's
# count applies. The setting keeps a plain default (not None) because editors show it in their settings schema.


def confidence(done: Done | None) -> float | None:
    if done is None:
        return None
    value = done.stats.extra.get("confidence")
    return float(value) if isinstance(value, int | float) else None


def below(done: Done | None, limit: float) -> float | None:
    """The reported confidence when it is under ``limit`` (the suggestion is withheld), else None."""
    value = confidence(done)
    if limit <= 0 or value is None or value >= limit:
        return None
    return value
