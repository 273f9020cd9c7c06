"""Held-out structure-repair cases, generated at run time from real documents on the machine (seeded, deterministic).

Sources (in this order; a missing one is skipped and reported):

* ``npm``: ``/usr/lib/node_modules/npm/node_modules/**/package.json`` (the manifests npm ships with Node.js);
* ``iso``: ``/usr/share/iso-codes/json/*.json`` (Debian ``iso-codes``: large lists of records, and JSON schemas);
* ``cmake``: ``/usr/share/cmake-*/Templates/MSBuild/FlagTables/*.json`` (Debian ``cmake-data``);
* ``lsp``: ``pytest_lsp/clients/*.json`` in the project's venv (LSP client capability files, deeply nested).

Categories: ``short`` (a real document of <= 200 lines, one or two editor breakages), ``long`` (~2,000-line
editor files, re-indented, one or two breakages mid-edit), ``llm`` (LLM-reply-style JSON: prose around it,
```json fences, truncation, Python literals, single quotes, trailing commas, comments, unquoted keys),
``jsonc`` (commented settings files, checked as JSONC: every comment must survive) and ``markdown`` (tables
and fences).

Every JSON case carries ``expected``: the original value with the broken member replaced by :data:`ANY` (any
value, or absent) where the breakage destroyed it (a half-typed value, a truncated tail); :data:`ANY_KEY` in a
dict admits one extra member (a half-typed key, or a reply truncated inside a key). :func:`matches` compares a
repaired value against it.
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()
ANY_KEY = "\x00any-key"


@dataclass
class Case:
    name: str
    category: str  # short | long | llm | jsonc | markdown
    language: str  # json | jsonc | markdown
    breakage: str
    text: str
    expected: Any = None  # JSON: see the module docstring
    comments: list[str] = field(default_factory=list)  # JSONC: comment texts that must survive
    cells: list[list[str]] = field(default_factory=list)  # Markdown tables: rows of cells that must survive
    fence_body: str = ""  # Markdown fences: the body that must stay inside the fence


def matches(got: Any, want: Any) -> bool:
    """``got`` equals ``want`` up to its wildcards (types compared exactly: 1 is not True)."""
    if want is ANY:
        return True
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return False
        extra = [k for k in got if k not in want]
        if len(extra) > (1 if ANY_KEY in want else 0):
            return False
        for k, v in want.items():
            if k == ANY_KEY:
                continue
            if k not in got:
                if v is ANY:
                    continue
                return False
            if not matches(got[k], v):
                return False
        return True
    if isinstance(want, list):
        if not isinstance(got, list):
            return False
        if len(got) == len(want) - 1 and want and want[-1] is ANY:
            want = want[:-1]
        return len(got) == len(want) and all(matches(g, w) for g, w in zip(got, want, strict=True))
    return type(got) is type(want) and got == want


# -- sources --------------------------------------------------------------------------------------------------


def _venv_site() -> str:
    return os.path.join(sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")


SOURCES = {
    "npm": "/usr/lib/node_modules/npm/node_modules/**/package.json",
    "iso": "/usr/share/iso-codes/json/*.json",
    "cmake": "/usr/share/cmake-*/Templates/MSBuild/FlagTables/*.json",
    "lsp": os.path.join(_venv_site(), "pytest_lsp", "clients", "*.json"),
}


def load_sources() -> dict[str, list[tuple[str, Any]]]:
    """{source: [(path, value), ...]} sorted by path; unreadable or invalid files are skipped."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for name, pattern in SOURCES.items():
        docs = []
        for path in sorted(glob.glob(pattern, recursive=True)):
            try:
                docs.append((path, json.loads(Path(path).read_text(encoding="utf-8"))))
            except (OSError, ValueError):
                continue
        out[name] = docs
    return out


# -- line model of a pretty-printed document ------------------------------------------------------------------


@dataclass
class Line:
    text: str
    path: tuple  # the member this line holds / opens / closes
    kind: str  # scalar | open | close
    key: str | None  # its key when it is an object member


def lines_of(value: Any, indent: int) -> list[Line]:
    """``json.dumps(value, indent=indent)`` split into lines, each with the path of its member."""
    out: list[Line] = []

    def walk(v: Any, path: tuple, key: str | None, pad: int, comma: bool) -> None:
        head = " " * pad + (json.dumps(key, ensure_ascii=False) + ": " if key is not None else "")
        tail = "," if comma else ""
        if isinstance(v, dict) and v:
            out.append(Line(head + "{", path, "open", key))
            items = list(v.items())
            for i, (k, x) in enumerate(items):
                walk(x, path + (k,), k, pad + indent, i < len(items) - 1)
            out.append(Line(" " * pad + "}" + tail, path, "close", key))
        elif isinstance(v, list) and v:
            out.append(Line(head + "[", path, "open", key))
            for i, x in enumerate(v):
                walk(x, path + (i,), None, pad + indent, i < len(v) - 1)
            out.append(Line(" " * pad + "]" + tail, path, "close", key))
        else:
            out.append(Line(head + json.dumps(v, ensure_ascii=False) + tail, path, "scalar", key))

    walk(value, (), None, 0, False)
    return out


def _set(value: Any, path: tuple, new: Any) -> Any:
    """A copy of ``value`` with the member at ``path`` replaced by ``new``."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (_set(v, rest, new) if k == head else v) for k, v in value.items()}
    return [(_set(v, rest, new) if i == head else v) for i, v in enumerate(value)]


def _with_any_key(value: Any, path: tuple) -> Any:
    """A copy of ``value`` whose dict at ``path`` admits one extra member."""
    if not path:
        return {**value, ANY_KEY: ANY}
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (_with_any_key(v, rest) if k == head else v) for k, v in value.items()}
    return [(_with_any_key(v, rest) if i == head else v) for i, v in enumerate(value)]


def _prefix(value: Any, lines: list[Line], upto: int) -> Any:
    """What survives when the document is cut inside line ``upto``: every member before it, the member of that
    line as ANY (it may be cut anywhere), nothing after."""
    cut = lines[upto]
    keep: set[tuple] = set()
    for ln in lines[:upto]:
        if ln.kind in ("scalar", "open"):
            keep.add(ln.path)

    def walk(v: Any, path: tuple) -> Any:
        if path == cut.path and path:
            return ANY
        if isinstance(v, dict):
            out = {k: walk(x, path + (k,)) for k, x in v.items() if path + (k,) in keep or path + (k,) == cut.path}
            return out
        if isinstance(v, list):
            return [walk(x, path + (i,)) for i, x in enumerate(v) if path + (i,) in keep or path + (i,) == cut.path]
        return v

    return walk(value, ())


# -- breakages of a pretty-printed (editor) document ----------------------------------------------------------

_STRAY = ["x", ";", "]", "}", "\\", ".", "`", "=", "#", "?"]


def _scalars(lines: list[Line], pred=lambda ln: True) -> list[int]:
    return [i for i, ln in enumerate(lines) if ln.kind == "scalar" and ln.path and pred(ln)]


def _value_str(ln: Line) -> bool:
    body = ln.text.rstrip(",")
    return body.endswith('"') and (ln.key is None or body.count('"') >= 4)


def _break_half_typed_value(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = _scalars(lines, lambda ln: _value_str(ln) and len(ln.text.rstrip(",")) - ln.text.rfind('": "') > 6)
    if not cand:
        return None
    i = rng.choice(cand)
    body = texts[i].rstrip(",")
    q = body.index('"', body.rfind(": ") if lines[i].key is not None else 0)
    cut = rng.randint(q + 2, len(body) - 2)
    texts[i] = body[:cut]  # typing: no closing quote, no comma yet
    return texts, _set(exp, lines[i].path, ANY)


def _break_half_typed_empty(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = _scalars(lines, lambda ln: ln.key is not None)
    if not cand:
        return None
    i = rng.choice(cand)
    texts[i] = (
        texts[i][: texts[i].index('": ') + 3].rstrip() if rng.random() < 0.5 else texts[i][: texts[i].index('": ') + 2]
    )
    return texts, _set(exp, lines[i].path, ANY)


def _break_half_typed_key(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = [i for i, ln in enumerate(lines) if ln.kind == "scalar" and ln.key is not None and len(ln.key) > 2]
    if not cand:
        return None
    i = rng.choice(cand)
    ind = texts[i][: len(texts[i]) - len(texts[i].lstrip())]
    partial = json.dumps(lines[i].key, ensure_ascii=False)[: rng.randint(2, len(lines[i].key))]
    texts.insert(i, ind + partial)  # a new member being typed above an existing one
    return texts, _with_any_key(exp, lines[i].path[:-1])


def _break_missing_comma(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = [i for i, ln in enumerate(lines) if ln.text.endswith(",")]
    if not cand:
        return None
    i = rng.choice(cand)
    texts[i] = texts[i][:-1]
    return texts, exp


def _break_missing_close(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = [i for i, ln in enumerate(lines) if ln.kind == "close" and ln.path and i > 0]
    if not cand:
        return None
    i = rng.choice(cand)
    if texts[i].endswith(","):
        # the close went, the comma stayed: "}," -> ","  (or the whole line went, half the time)
        if rng.random() < 0.5:
            texts[i] = texts[i].replace("}", "").replace("]", "")
        else:
            del texts[i]
            texts[i - 1] = texts[i - 1] + "," if not texts[i - 1].endswith(("{", "[", ",")) else texts[i - 1]
    else:
        del texts[i]
    return texts, exp


def _break_missing_quote(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = _scalars(lines, lambda ln: ln.key is not None and re.fullmatch(r"[A-Za-z_$][\w$-]*", ln.key) is not None)
    if not cand:
        return None
    i = rng.choice(cand)
    t = texts[i]
    if rng.random() < 0.5:
        j = t.index('"')
        texts[i] = t[:j] + t[j + 1 :]  # name": 1
    else:
        j = t.index('":')
        texts[i] = t[:j] + t[j + 1 :]  # "name: 1
    return texts, exp


def _break_unterminated_string(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = _scalars(lines, _value_str)
    if not cand:
        return None
    i = rng.choice(cand)
    t = texts[i]
    comma = t.endswith(",")
    body = t.rstrip(",")
    texts[i] = body[:-1] + ("," if comma else "")
    return texts, exp


def _break_stray_token(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    i = rng.randrange(1, len(texts) - 1)
    tok = rng.choice(_STRAY)
    if rng.random() < 0.5:
        texts[i] = texts[i] + tok
    else:
        ind = len(texts[i]) - len(texts[i].lstrip())
        texts[i] = texts[i][:ind] + tok + texts[i][ind:]
    return texts, exp


def _break_single_quotes(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = _scalars(lines, lambda ln: _value_str(ln) and "'" not in ln.text and "\\" not in ln.text)
    if not cand:
        return None
    i = rng.choice(cand)
    t = texts[i]
    comma = t.endswith(",")
    body = t.rstrip(",")
    q = body.index('"', body.rfind(": ") if lines[i].key is not None else 0)
    texts[i] = body[:q] + "'" + body[q + 1 : -1] + "'" + ("," if comma else "")
    return texts, exp


def _break_trailing_comma(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = [i for i, ln in enumerate(lines[:-1]) if not ln.text.endswith((",", "{", "["))]
    if not cand:
        return None
    i = rng.choice(cand)
    texts[i] += ","
    return texts, exp


def _break_windows_path(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = _scalars(lines, lambda ln: _value_str(ln) and ln.key is not None)
    if not cand:
        return None
    i = rng.choice(cand)
    t = texts[i]
    comma = t.endswith(",")
    j = t.index('": "') + 3
    path = rng.choice(["C:\\Users\\dev\\app", "D:\\Projects\\site\\x1", "C:\\Windows\\Temp"])
    texts[i] = t[:j] + json.dumps(path)[:-1].replace("\\\\", "\\") + '"' + ("," if comma else "")
    return texts, _set(exp, lines[i].path, path)


def _break_unquoted_dollar_key(
    rng: random.Random, lines: list[Line], texts: list[str], exp: Any
) -> tuple[list[str], Any] | None:
    cand = _scalars(lines, lambda ln: ln.key is not None and re.fullmatch(r"[A-Za-z_]\w*", ln.key) is not None)
    if not cand:
        return None
    i = rng.choice(cand)
    t = texts[i]
    key = lines[i].key
    texts[i] = t.replace(f'"{key}"', f"${key}", 1)
    return texts, _rename(exp, lines[i].path, "$" + key)


_BREAKS = {
    "half-typed-value": _break_half_typed_value,
    "half-typed-empty": _break_half_typed_empty,
    "half-typed-key": _break_half_typed_key,
    "missing-comma": _break_missing_comma,
    "missing-close": _break_missing_close,
    "missing-quote": _break_missing_quote,
    "unterminated-string": _break_unterminated_string,
    "stray-token": _break_stray_token,
    "single-quotes": _break_single_quotes,
    "trailing-comma": _break_trailing_comma,
    "windows-path": _break_windows_path,
    "unquoted-dollar-key": _break_unquoted_dollar_key,
}


def editor_break(rng: random.Random, value: Any, lines: list[Line], kind: str) -> tuple[list[str], Any] | None:
    """Apply one breakage of ``kind``; returns (new lines, expected value) or None when it does not apply."""
    if kind not in _BREAKS:
        raise ValueError(kind)
    return _BREAKS[kind](rng, lines, [ln.text for ln in lines], value)


def _rename(value: Any, path: tuple, new_key: str) -> Any:
    if len(path) == 1:
        return {(new_key if k == path[0] else k): v for k, v in value.items()}
    head = path[0]
    if isinstance(value, dict):
        return {k: (_rename(v, path[1:], new_key) if k == head else v) for k, v in value.items()}
    return [(_rename(v, path[1:], new_key) if i == head else v) for i, v in enumerate(value)]


EDITOR_KINDS = [
    "half-typed-value",
    "half-typed-empty",
    "half-typed-key",
    "missing-comma",
    "missing-close",
    "missing-quote",
    "unterminated-string",
    "stray-token",
    "single-quotes",
    "trailing-comma",
    "windows-path",
    "unquoted-dollar-key",
]


def _editor_case(rng: random.Random, name: str, category: str, value: Any, indent: int, n_breaks: int) -> Case | None:
    """One breakage anywhere, or two: one in each half of the document."""
    lines = lines_of(value, indent)
    n = len(lines)
    ranges = [(0, n)] if n_breaks == 1 or n < 8 else [(0, n // 2), (n // 2, n)]
    parts: list[list[str]] = []
    exp, kinds = value, []
    for lo, hi in ranges:
        sub = lines[lo:hi]
        kind = rng.choice(EDITOR_KINDS)
        got = editor_break(rng, value, sub, kind)
        if got is None:
            parts.append([ln.text for ln in sub])
            continue
        parts.append(got[0])
        exp = _merge_expected(exp, got[1], value)
        kinds.append(kind)
    if not kinds:
        return None
    text = "\n".join(t for part in parts for t in part) + "\n"
    try:
        json.loads(text)
        return None  # the breakage happened to be valid JSON
    except ValueError:
        pass
    return Case(name, category, "json", "+".join(kinds), text, exp)


def _merge_expected(a: Any, b: Any, orig: Any) -> Any:
    """Two breakages' expected values on one original: where either differs from the original, take it."""
    if a is ANY or b is ANY:
        return ANY
    if isinstance(orig, dict) and isinstance(a, dict) and isinstance(b, dict):
        keys = list(dict.fromkeys(list(a) + list(b)))
        out = {}
        for k in keys:
            if k in orig and k in a and k in b:
                out[k] = _merge_expected(a[k], b[k], orig[k])
            elif k in a and k not in orig:
                out[k] = a[k]
            elif k in b and k not in orig:
                out[k] = b[k]
        return out
    if isinstance(orig, list) and isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == len(orig):
        return [_merge_expected(x, y, o) for x, y, o in zip(a, b, orig, strict=True)]
    return b if a == orig else a


# -- LLM replies ----------------------------------------------------------------------------------------------

_PROSE_BEFORE = [
    "Sure! Here is the JSON you asked for:\n\n",
    "Here's the updated configuration:\n",
    "Certainly. The result is below.\n\n",
    "Output:\n",
]
_PROSE_AFTER = [
    "\n\nLet me know if you need anything else.",
    "\nThis keeps every field from the original.",
    "\n\nNote: the values are examples.",
    "",
]
LLM_KINDS = [
    "fence",
    "prose-fence",
    "prose-inline",
    "truncated",
    "python-literals",
    "single-quotes-all",
    "trailing-commas",
    "comments",
    "unquoted-keys",
    "missing-closers",
]


def _small(rng: random.Random, value: Any) -> Any:
    """A small piece of a real document (what a model would be asked to produce): 3-12 members."""
    if isinstance(value, dict):
        items = list(value.items())
        k = min(len(items), rng.randint(3, 12))
        start = rng.randrange(0, max(1, len(items) - k + 1))
        return dict(items[start : start + k])
    if isinstance(value, list):
        k = min(len(value), rng.randint(2, 6))
        return value[:k]
    return value


def _jsish(value: Any, quote: str = '"', unquoted_keys: bool = False, py: bool = False) -> str:
    """Compact, LLM-ish serialisation with another quote style / bare keys / Python literals."""
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            key = k if unquoted_keys and re.fullmatch(r"[A-Za-z_$][\w$]*", k) else _q(k, quote)
            parts.append(f"{key}: {_jsish(v, quote, unquoted_keys, py)}")
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_jsish(v, quote, unquoted_keys, py) for v in value) + "]"
    if isinstance(value, str):
        return _q(value, quote)
    if py and value is True:
        return "True"
    if py and value is False:
        return "False"
    if py and value is None:
        return "None"
    return json.dumps(value)


def _q(s: str, quote: str) -> str:
    if quote == '"':
        return json.dumps(s, ensure_ascii=False)
    body = json.dumps(s, ensure_ascii=False)[1:-1].replace('\\"', '"').replace("'", "\\'")
    return "'" + body + "'"


def _llm_case(rng: random.Random, name: str, value: Any) -> Case | None:
    kind = rng.choice(LLM_KINDS)
    v = _small(rng, value)
    if not isinstance(v, (dict, list)) or not v:
        return None
    pretty = json.dumps(v, indent=2, ensure_ascii=False)
    exp: Any = v
    if kind == "fence":
        text = "```json\n" + pretty + "\n```\n"
    elif kind == "prose-fence":
        text = rng.choice(_PROSE_BEFORE) + "```json\n" + pretty + "\n```" + rng.choice(_PROSE_AFTER) + "\n"
    elif kind == "prose-inline":
        text = rng.choice(_PROSE_BEFORE) + pretty + rng.choice(_PROSE_AFTER[:3]) + "\n"
    elif kind == "truncated":
        lines = lines_of(v, 2)
        if len(lines) < 4:
            return None
        i = rng.randrange(len(lines) // 2, len(lines) - 1)
        if lines[i].kind == "close":
            return None
        cut_in = rng.randint(1, max(1, len(lines[i].text) - 1))
        text = "\n".join(ln.text for ln in lines[:i]) + "\n" + lines[i].text[:cut_in]
        exp = _prefix(v, lines, i)
        if lines[i].key is not None and lines[i].text[:cut_in].count('"') < 2:
            exp = _with_any_key(exp, lines[i].path[:-1])  # cut inside the key: a half-typed key, one extra member
    elif kind == "python-literals":
        text = repr(v) + "\n"
        if any(isinstance(x, float) for x in _leaves(v)):
            return None
    elif kind == "single-quotes-all":
        text = _jsish(v, "'") + "\n"
    elif kind == "trailing-commas":
        text = re.sub(r"([\]}\"0-9el])\n(\s*[\]}])", r"\1,\n\2", pretty) + "\n"
    elif kind == "comments":
        lines = pretty.split("\n")
        for _ in range(rng.randint(1, 3)):
            j = rng.randrange(1, len(lines))
            ind = len(lines[j]) - len(lines[j].lstrip())
            lines.insert(j, " " * ind + rng.choice(["// the value from the request", "/* optional */", "// TODO"]))
        text = "\n".join(lines) + "\n"
    elif kind == "unquoted-keys":
        text = _jsish(v, '"', unquoted_keys=True) + "\n"
    else:  # missing-closers: the reply stopped right after a complete member
        lines = lines_of(v, 2)
        opened = [i for i, ln in enumerate(lines) if ln.kind == "close"]
        if len(opened) < 2:
            return None
        i = opened[-1]
        k = rng.randint(1, min(3, sum(1 for ln in lines[i:] if ln.kind == "close")))
        kept = [ln.text for ln in lines[: len(lines) - k]]
        text = "\n".join(kept).rstrip(",") + "\n"
    try:
        json.loads(text)
        return None
    except ValueError:
        pass
    return Case(name, "llm", "json", kind, text, exp)


def _leaves(v: Any):
    if isinstance(v, dict):
        for x in v.values():
            yield from _leaves(x)
    elif isinstance(v, list):
        for x in v:
            yield from _leaves(x)
    else:
        yield v


# -- JSONC ----------------------------------------------------------------------------------------------------


def _jsonc_case(rng: random.Random, name: str, value: Any) -> Case | None:
    """A commented settings-like file with one editor breakage; every comment must survive the repair."""
    v = _small(rng, value) if len(json.dumps(value)) > 3000 else value
    kind = rng.choice(["missing-comma", "missing-close", "unterminated-string", "half-typed-value", "stray-token"])
    got = editor_break(rng, v, lines_of(v, 2), kind)
    if got is None:
        return None
    texts, exp = got
    comments = []
    for _ in range(rng.randint(2, 4)):
        j = rng.randrange(1, len(texts))
        ind = len(texts[j]) - len(texts[j].lstrip())
        c = rng.choice(["// keep in sync with the CI", "// local override", "/* see docs */", "// $id stays"])
        comments.append(c)
        texts.insert(j, " " * ind + c)
    return Case(name, "jsonc", "jsonc", kind, "\n".join(texts) + "\n", exp, comments=comments)


# -- Markdown -------------------------------------------------------------------------------------------------


def _md_case(rng: random.Random, name: str, records: list[dict]) -> Case | None:
    recs = [r for r in records if isinstance(r, dict)]
    if len(recs) < 3:
        return None
    cols = sorted({k for r in recs[:20] for k in r if isinstance(r.get(k), (str, int))})[:4]
    if len(cols) < 2:
        return None
    rows = [[str(r.get(c, "")).replace("|", "/") for c in cols] for r in recs[: rng.randint(3, 8)]]
    kind = rng.choice(["table-ragged", "table-no-separator", "unclosed-fence", "unclosed-fence-json"])
    head = "| " + " | ".join(cols) + " |"
    sep = "| " + " | ".join("---" for _ in cols) + " |"
    body = ["| " + " | ".join(r) + " |" for r in rows]
    cells = [cols] + rows
    intro = "# Records\n\nThe table lists a few entries.\n\n"
    if kind == "table-ragged":
        j = rng.randrange(len(body))
        body[j] = "| " + " | ".join(rows[j][:-1]) + " |"  # a row with a cell missing
        cells = [cols] + [r if k != j else r[:-1] for k, r in enumerate(rows)]
        text = intro + "\n".join([head, sep] + body) + "\n\nMore text.\n"
        return Case(name, "markdown", "markdown", kind, text, cells=cells)
    if kind == "table-no-separator":
        text = intro + "\n".join([head] + body) + "\n\nMore text.\n"
        return Case(name, "markdown", "markdown", kind, text, cells=cells)
    code = json.dumps(recs[0], indent=2, ensure_ascii=False) if kind.endswith("json") else "def f(x):\n    return x\n"
    info = "json" if kind.endswith("json") else "python"
    text = intro + f"```{info}\n{code.rstrip()}\n"
    if rng.random() < 0.5:
        text += "\n"
    return Case(name, "markdown", "markdown", kind, text, fence_body=code.rstrip())


# -- the whole set --------------------------------------------------------------------------------------------


def _records(value: Any) -> list:
    """The longest list of records in a document (iso-codes: {"3166-2": [...]}, cmake: [...])."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        lists = [v for v in value.values() if isinstance(v, list)]
        return max(lists, key=len) if lists else []
    return []


def _long_doc(rng: random.Random, value: Any, target_lines: int = 2000) -> Any | None:
    recs = _records(value)
    if len(recs) < 50:
        return None
    key = next((k for k, v in value.items() if v is recs), "items") if isinstance(value, dict) else None
    n = min(len(recs), 100)
    for _ in range(4):  # grow the slice until it is about target_lines long (records differ in size)
        start = rng.randrange(0, max(1, len(recs) - n))
        part = recs[start : start + n]
        got = len(lines_of(part, 2))
        if abs(got - target_lines) < target_lines // 10 or n == len(recs):
            break
        n = min(len(recs), max(10, n * target_lines // max(1, got)))
    return {key: part} if key else part


def generate(seed: int = 0, counts: dict[str, int] | None = None) -> tuple[list[Case], dict[str, int]]:
    """(cases, documents per source). Deterministic for a given seed and the same source files."""
    counts = counts or {"short": 120, "long": 60, "llm": 120, "jsonc": 40, "markdown": 60}
    rng = random.Random(seed)
    src = load_sources()
    found = {k: len(v) for k, v in src.items()}
    small = [(p, v) for name in ("npm", "iso", "lsp") for p, v in src[name] if len(json.dumps(v, indent=2)) < 8000]
    small += [(p, {"items": _records(v)[:6]}) for p, v in src["cmake"] + src["iso"] if len(_records(v)) >= 6]
    bigs = [(p, v) for name in ("iso", "cmake", "lsp") for p, v in src[name] if len(_records(v)) >= 50]
    cases: list[Case] = []

    def fill(category: str, make) -> None:
        made, tries = 0, 0
        while made < counts[category] and tries < counts[category] * 20:
            tries += 1
            c = make(made)
            if c is not None:
                cases.append(c)
                made += 1

    def short(i: int) -> Case | None:
        p, v = small[rng.randrange(len(small))]
        if len(lines_of(v, 2)) > 200 or not isinstance(v, (dict, list)) or not v:
            return None
        return _editor_case(
            rng, f"short-{i}:{Path(p).parent.name}/{Path(p).name}", "short", v, 2, rng.choice([1, 1, 2])
        )

    def long(i: int) -> Case | None:
        p, v = bigs[rng.randrange(len(bigs))]
        doc = _long_doc(rng, v)
        if doc is None:
            return None
        return _editor_case(rng, f"long-{i}:{Path(p).name}", "long", doc, rng.choice([2, 4]), rng.choice([1, 2]))

    def llm(i: int) -> Case | None:
        p, v = small[rng.randrange(len(small))]
        return _llm_case(rng, f"llm-{i}:{Path(p).parent.name}/{Path(p).name}", v)

    def jsonc(i: int) -> Case | None:
        p, v = small[rng.randrange(len(small))]
        if not isinstance(v, dict) or len(v) < 3:
            return None
        return _jsonc_case(rng, f"jsonc-{i}:{Path(p).parent.name}/{Path(p).name}", v)

    def md(i: int) -> Case | None:
        p, v = bigs[rng.randrange(len(bigs))] if bigs else small[rng.randrange(len(small))]
        return _md_case(rng, f"md-{i}:{Path(p).name}", _records(v))

    if small:
        fill("short", short)
        fill("llm", llm)
        fill("jsonc", jsonc)
    if bigs:
        fill("long", long)
        fill("markdown", md)
    return cases, found
