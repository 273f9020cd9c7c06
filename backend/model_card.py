"""``dgemma_lsp.json`` in a checkpoint folder: what a checkpoint recommends about how it is served.

Recognised keys: ``min_confidence`` (the suggestion gate, ``lsp/confidence.py``) and ``t_min`` / ``t_max`` (the
completion temperature schedule). Each applies only where the user left the setting unset. ``measured`` (label ->
text: the checkpoint's scores, with where they were measured) is what ``dgemma-lsp doctor`` prints about the model;
anything else in the file (a ``why``) is for people. The embedded small model ships one; a folder without the file recommends nothing.

A folder with a card also recommends its ``generation_config.json``'s ``max_denoising_steps`` as the completion
step count (``denoising_steps``, where the user left the server default): the checkpoint's trainer knows how few
steps it holds up at. Checkpoints without a card (the 26B, whose generation config says 48) keep the server's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MODEL_CARD = "dgemma_lsp.json"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def read_card(model_dir: str | Path) -> dict[str, float]:
    """The usable recommendations of a checkpoint folder's card ({} without one); invalid entries are dropped."""
    try:
        card = json.loads((Path(model_dir) / MODEL_CARD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(card, dict):
        return {}
    out: dict[str, float] = {}
    gate = _number(card.get("min_confidence"))
    if gate is not None and 0.0 <= gate <= 1.0:
        out["min_confidence"] = gate
    lo, hi = _number(card.get("t_min")), _number(card.get("t_max"))
    if lo is not None and hi is not None and 0.0 <= lo < hi:
        out["t_min"], out["t_max"] = lo, hi
    try:
        gen = json.loads((Path(model_dir) / "generation_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        gen = {}
    steps = gen.get("max_denoising_steps") if isinstance(gen, dict) else None
    if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1:
        out["denoising_steps"] = steps
    return out


def read_measured(model_dir: str | Path) -> dict[str, str]:
    """The card's ``measured`` scores (label -> text; {} without a card or with a malformed entry)."""
    try:
        card = json.loads((Path(model_dir) / MODEL_CARD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    measured = card.get("measured") if isinstance(card, dict) else None
    if not isinstance(measured, dict):
        return {}
    return {str(k): str(v) for k, v in measured.items() if isinstance(v, str | int | float)}
