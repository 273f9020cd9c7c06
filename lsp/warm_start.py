"""Warm start: a completion canvas seeded from the suggestion the user is typing into.

When the user types into the ghost text and typing-through cannot answer (they typed something else, or they
accepted the whole suggestion and went on), the last canvas still holds text that may be right: the rest of the
line after the word they replaced, or what the canvas had after the part that was shown. The next request then
starts its canvas from that text instead of from noise (``CanvasRequest.seed_canvas``), with fewer denoising
steps. What the user typed is not in the canvas: it is in the prompt, the prefix before the cursor, where the model
cannot change it.

Measured in ``bench/warm_start.py`` (bench/RESULTS.md, "Warm start").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["WarmSeed", "still_valid", "seed_request", "WARM_STEPS_FRACTION", "MAX_TYPED"]

# A warm canvas starts close to its answer: this share of the denoising steps (at least 2) is enough.
WARM_STEPS_FRACTION = 0.5
# Typed text longer than this since the suggestion appeared is a new situation, not a divergence.
MAX_TYPED = 160
_WORD_RUN = re.compile(r"[A-Za-z0-9_]*")


@dataclass(slots=True)
class WarmSeed:
    """The text a warm canvas starts from. ``kind``: ``diverged`` (the user typed something else into the
    suggestion) or ``accepted`` (they typed or accepted all of what was shown and went on)."""

    kind: str
    text: str
    eos: bool  # the previous canvas ended inside its width: the seed ends there too


def still_valid(
    anchor: str, shown_suffix: str, raw: str, eos: bool, pre: str, suf: str, *, mid_word: bool = False
) -> WarmSeed | None:
    """What of the last canvas's text ``raw`` (at ``anchor``) still fits after the user typed, or None.

    ``anchor`` is the text before the cursor when the suggestion was made, ``pre`` / ``suf`` the text before and
    after the cursor now. The text after the cursor must be unchanged, and the user must have typed at most
    :data:`MAX_TYPED` characters since the anchor, starting like the suggestion (or all of it)."""
    if not raw or suf != shown_suffix:
        return None
    for k in range(1, min(MAX_TYPED, len(pre)) + 1):
        if pre.endswith(anchor, 0, len(pre) - k):
            typed = pre[len(pre) - k :]
            break
    else:
        return None
    common = 0
    while common < min(len(typed), len(raw)) and typed[common] == raw[common]:
        common += 1
    if common == len(typed):  # all typed text came from the canvas: the rest of it is still the guess
        rest = raw[common:]
        return WarmSeed("accepted", rest, eos) if rest.strip() else None
    tail = typed[common:]
    if common == 0 or "\n" in tail:
        return None  # nothing in common, or the user went on to another line: a cold start
    # The user replaced the word at the divergence and typed the punctuation after it: the canvas's text after
    # that word and punctuation is still its guess, and lines up with the cursor. Mid-word (no punctuation yet)
    # the canvas would first have to finish the word: nothing lines up, a cold start.
    punct = tail[_WORD_RUN.match(tail).end() :]
    after = raw[common:]
    after = after[_WORD_RUN.match(after).end() :]
    if mid_word and not punct:
        rest = after  # the benchmark's variant: seed what came after the replaced word, unaligned
    elif not punct or not after.startswith(punct):
        return None
    else:
        rest = after[len(punct) :]
    return WarmSeed("diverged", rest, eos) if rest.strip() else None


def seed_request(req: Any, seed: WarmSeed, tokenizer: Any, denoising_steps: int) -> None:
    """Seed ``req`` (a :class:`CanvasRequest`) with ``seed`` and cut its steps (in place)."""
    if tokenizer is not None and hasattr(tokenizer, "encode"):
        from dgemma_lsp.backend.chat_tokens import text_ids

        ids = [int(t) for t in text_ids(tokenizer, seed.text)][: req.canvas_length]
        if seed.eos and len(ids) < req.canvas_length:
            stop = _stop_token(tokenizer)
            if stop is not None:
                ids += [stop] * (req.canvas_length - len(ids))
        req.seed_canvas = ids
    else:
        req.seed_text = seed.text  # the backend tokenizes it and pads with noise
    req.max_denoising_steps = max(2, round(denoising_steps * WARM_STEPS_FRACTION))
    req.tag = f"{req.tag}:warm-{seed.kind}"


def _stop_token(tokenizer: Any) -> int | None:
    for t in ("<end_of_turn>", "<turn|>"):
        i = tokenizer.convert_tokens_to_ids(t)
        if isinstance(i, int) and i != getattr(tokenizer, "unk_token_id", None):
            return i
    eos = getattr(tokenizer, "eos_token_id", None)
    return int(eos) if isinstance(eos, int) else None
