"""Encoder KV caches of recent prompts, so a keystroke encodes only the prompt's changed tail.

DiffusionGemma's encoder is causal: the keys and values of a prompt's first ``n`` tokens depend on those tokens
alone. The server lays prompts out so that typing changes only their last few dozen tokens (``lsp/prompt.py``,
format 2), so the cache of the previous keystroke's prompt, cropped to the longest common token prefix, is exactly
what a cold encode of the new prompt would compute for that prefix; ``generate`` then encodes only the rest.

A few entries (different documents, a completion and a next edit) are kept, least recently used first out. Sliding
window layers drop keys older than their window, so a prompt whose generation could reach the window is encoded
cold and not kept.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

ENTRIES = 4  # documents a user switches between; each holds ~2.5 MB per 1k tokens for the 34 M model in bf16


def common_prefix(a: Any, b: Any) -> int:
    """Length of the common prefix of two 1-D token tensors."""
    import torch

    n = min(len(a), len(b))
    diff = torch.nonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


class PromptCache:
    """An LRU of (prompt token ids, encoder cache holding exactly those tokens) for one model."""

    def __init__(self, model: Any, entries: int = ENTRIES) -> None:
        text = model.config.get_text_config(decoder=True)
        self._config = text
        sliding = "sliding_attention" in (getattr(text, "layer_types", None) or [])
        self.window: int | None = text.sliding_window if sliding and text.sliding_window else None
        self.entries = entries
        self._lru: OrderedDict[int, tuple[Any, Any]] = OrderedDict()  # key -> (prompt ids tensor, cache)
        self._next_key = 0
        self.reused_tokens = 0  # prompt tokens not encoded again, across requests (status, tests)
        self.encoded_tokens = 0  # prompt tokens encoded

    def fits(self, prompt_len: int, new_tokens: int) -> bool:
        """Whether a generation over this prompt stays inside every sliding window (so its cache can be cropped)."""
        return self.window is None or prompt_len + new_tokens < self.window - 1

    def take(self, prompt: Any, new_tokens: int) -> tuple[Any, int]:
        """A cache for ``prompt`` (1-D ids) and how many of its first tokens it already holds (< len(prompt)).

        The cache is removed from the LRU (``generate`` extends it in place); give it back with :meth:`put`.
        Returns ``(None, 0)`` when the generation may outgrow a sliding window: ``generate`` then encodes cold.
        """
        from transformers import DynamicCache

        if not self.fits(len(prompt), new_tokens):
            self.encoded_tokens += len(prompt)
            return None, 0
        best, best_n = None, 0
        for key, (ids, _) in self._lru.items():
            n = common_prefix(ids, prompt)
            if n > best_n:
                best, best_n = key, n
        # Reuse only when most of that entry survives: cropping another document's cache to its chat header saves
        # a few tokens and loses the document.
        if best is not None and 2 * best_n >= len(self._lru[best][0]):
            _, cache = self._lru.pop(best)
            keep = min(best_n, len(prompt) - 1)  # generate needs at least one new token to encode
            cache.crop(keep - cache.get_seq_length())
            self.reused_tokens += keep
            self.encoded_tokens += len(prompt) - keep
            return cache, keep
        self.encoded_tokens += len(prompt)
        return DynamicCache(config=self._config), 0

    def put(self, prompt: Any, cache: Any) -> None:
        """Keep ``cache`` (holding ``prompt`` and maybe generated canvases after it) for later prompts."""
        if cache is None or cache.get_seq_length() < len(prompt):
            return  # the encode did not finish: nothing trustworthy to keep
        cache.crop(len(prompt) - cache.get_seq_length())  # the canvases differ from request to request
        self._lru[self._next_key] = (prompt, cache)
        self._next_key += 1
        while len(self._lru) > self.entries:
            self._lru.popitem(last=False)

    def clear(self) -> None:
        self._lru.clear()
