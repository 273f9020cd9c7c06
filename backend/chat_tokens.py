"""Token ids for prompts and seed canvases that keep the user's text as text.

A document may contain the model's control strings: a file about Gemma holds ``<start_of_turn>``, a tokenizer's
test data holds ``<mask>``, a log holds ``<eos>``. Rendering the chat template and tokenizing the result, as
``apply_chat_template(tokenize=True)`` does, turns those strings into control tokens: the document ends the user's
turn, opens a model turn of its own, or ends a seed canvas early. Here the template's own text is tokenized as usual
and every message's content (and every seed text) with ``split_special_tokens=True``, so the text reaches the model
as the characters it is. Text without a control string is tokenized exactly as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# Private-use code points: no template or document mixes them into a message by accident.
_MARK = "\ue000dgemma-message-{}\ue001"


class _Controls:
    """The tokenizer's control strings, indexed for a fast scan (a Gemma tokenizer has hundreds)."""

    def __init__(self, strings: set[str]) -> None:
        self.strings = tuple(sorted(strings, key=len, reverse=True))
        self.exact = frozenset(strings)
        self.lengths: dict[str, tuple[int, ...]] = {}
        for s in strings:
            self.lengths[s[0]] = tuple(sorted({*self.lengths.get(s[0], ()), len(s)}))

    def found_in(self, text: str) -> bool:
        for first, lengths in self.lengths.items():
            i = text.find(first)
            while i >= 0:
                if any(text[i : i + n] in self.exact for n in lengths):
                    return True
                i = text.find(first, i + 1)
        return False


def _controls(tokenizer: Any) -> _Controls:
    cached = getattr(tokenizer, "_dgemma_controls", None)
    if cached is not None:
        return cached
    found = set(getattr(tokenizer, "all_special_tokens", None) or ())
    for tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(tok, "special", False):
            found.add(str(tok.content))
    out = _Controls({s for s in found if s})
    try:
        tokenizer._dgemma_controls = out
    except AttributeError:  # a tokenizer that refuses new attributes: rebuilt each time (cheap)
        pass
    return out


def special_strings(tokenizer: Any) -> tuple[str, ...]:
    """The control strings the tokenizer would turn into single special tokens, longest first."""
    return _controls(tokenizer).strings


def has_control_string(tokenizer: Any, text: str) -> bool:
    return _controls(tokenizer).found_in(text)


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """``text`` as plain text: control strings in it become ordinary tokens, never control tokens."""
    if not has_control_string(tokenizer, text):
        return [int(i) for i in tokenizer.encode(text, add_special_tokens=False)]
    return [int(i) for i in tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)]


def _ids(out: Any) -> list[int]:
    if isinstance(out, Mapping) or hasattr(out, "keys"):
        out = out["input_ids"]
    return [int(i) for i in out]


def chat_prompt_ids(tokenizer: Any, messages: Iterable[Mapping[str, str]]) -> list[int]:
    """The chat template's prompt (with the generation prompt) as token ids; message contents stay text."""
    msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
    if not any(has_control_string(tokenizer, m["content"]) for m in msgs):
        return _ids(tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True))
    rendered = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    marks = [_MARK.format(i) for i in range(len(msgs))]
    skeleton = tokenizer.apply_chat_template(
        [{"role": m["role"], "content": k} for m, k in zip(msgs, marks, strict=True)],
        add_generation_prompt=True,
        tokenize=False,
    )
    if any(skeleton.count(k) != 1 for k in marks):
        return _escaped(tokenizer, msgs)
    # the contents as the template wrote them (Gemma's trims them): the variant that rebuilds the real render
    for shape in (str, str.strip):
        bodies = [shape(m["content"]) for m in msgs]
        rebuilt = skeleton
        for k, body in zip(marks, bodies, strict=True):
            rebuilt = rebuilt.replace(k, body)
        if rebuilt == rendered:
            break
    else:
        return _escaped(tokenizer, msgs)
    ids: list[int] = []
    pos = 0
    for k, body in zip(marks, bodies, strict=True):
        at = skeleton.index(k, pos)
        ids += _ids(tokenizer.encode(skeleton[pos:at], add_special_tokens=False)) if at > pos else []
        ids += text_ids(tokenizer, body) if body else []
        pos = at + len(k)
    if pos < len(skeleton):
        ids += _ids(tokenizer.encode(skeleton[pos:], add_special_tokens=False))
    return ids


def _escaped(tokenizer: Any, msgs: list[dict[str, str]]) -> list[int]:
    """Fallback for a template that rewrites contents beyond trimming: break each control string with a zero-width
    space, so the document still cannot act as a control token."""
    specials = special_strings(tokenizer)
    safe = []
    for m in msgs:
        c = m["content"]
        for s in specials:
            c = c.replace(s, s[:1] + "\u200b" + s[1:])
        safe.append({"role": m["role"], "content": c})
    return _ids(tokenizer.apply_chat_template(safe, add_generation_prompt=True, tokenize=True))
