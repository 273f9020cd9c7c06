"""The embedded default model: the project's small trained checkpoint when it ships with the package,
else the random-weight tiny fixture (plumbing only: its suggestions are noise)."""

from __future__ import annotations

from pathlib import Path

SMALL_MODEL_DIR = Path(__file__).parent / "models" / "small"


def default_model() -> tuple[Path, str]:
    """Return (checkpoint folder, human-readable label)."""
    if (SMALL_MODEL_DIR / "config.json").is_file() and any(SMALL_MODEL_DIR.glob("*.safetensors")):
        # Honest label: a 6.9 M model good at short completions and JSON repair only (bench/RESULTS.md, "Small model
        # quality").
        return (
            SMALL_MODEL_DIR,
            f"embedded small model, experimental: short suggestions only, low-confidence ones withheld ({SMALL_MODEL_DIR})",
        )
    from .tiny_model.builder import ensure_tiny_checkpoint

    path = ensure_tiny_checkpoint()
    return path, f"embedded tiny fixture, random weights ({path})"
