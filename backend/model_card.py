"""``dgemma_lsp.json`` in a checkpoint folder: what a checkpoint says about how it should be served.

Only ``min_confidence`` so far: the suggestion threshold the checkpoint's own evaluation supports (see
``lsp/confidence.py``). The embedded small model ships one; a folder without the file recommends nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

MODEL_CARD = "dgemma_lsp.json"


def recommended_min_confidence(model_dir: str | Path) -> float | None:
    """The threshold a checkpoint folder recommends for itself, or None (no card, or an unusable value)."""
    try:
        card = json.loads((Path(model_dir) / MODEL_CARD).read_text(encoding="utf-8"))
        value = float(card["min_confidence"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if 0.0 <= value <= 1.0 else None
