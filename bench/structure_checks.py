"""Timing figures for the structure checks on ~1 MB documents: ``python bench/structure_checks.py``."""

from __future__ import annotations

import functools
import json
import random
import statistics
import time
from collections.abc import Callable

from dgemma_lsp.lsp import diagnostics as _diag
from dgemma_lsp.lsp.repair import jsonc as _json
from dgemma_lsp.lsp.repair.rules import rules_fix


def _clear() -> None:
    _json.parse.cache_clear()
    _json.fast_valid.cache_clear()
    _diag._CACHE.clear()


def _median_ms(fn: Callable[[], object], n: int = 5) -> float:
    times = []
    for _ in range(n):
        _clear()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def documents() -> dict[str, tuple[str, str]]:
    """name -> (language, text): valid / broken JSON, JSONC with comments, Markdown with tables and fences."""
    rnd = random.Random(0)
    items = [
        {
            "id": i,
            "name": f"user{i}",
            "email": f"u{i}@example.com",
            "tags": ["a", "b", "c"],
            "score": rnd.random(),
            "active": i % 2 == 0,
            "addr": {"city": "X", "zip": "12345"},
        }
        for i in range(4600)
    ]
    doc = json.dumps(items, indent=2)
    broken = doc.replace('"zip": "12345"\n', '"zip": "12345",\n', 1)
    mid = len(broken) // 2
    broken = broken[:mid] + broken[mid:].replace('"active": true,', '"active": true', 1)
    unit = (
        "# Title\n\nSome *text* with `code` and [links](http://x).\nMore prose on a second line.\n\n"
        '| a | b |\n|---|---|\n| 1 | 2 |\n\n```json\n{"a": 1}\n```\n\n'
    )
    prose = "# Title\n\nSome text with code and links, a plain paragraph.\nMore prose on a second line.\n\n"
    return {
        "valid JSON": ("json", doc),
        "broken JSON (2 errors)": ("json", broken),
        "JSONC (200 comments)": ("jsonc", doc.replace('"name"', '// note\n    "name"', 200)),
        "Markdown prose": ("markdown", prose * (1_000_000 // len(prose))),
        "Markdown tables+fences": ("markdown", unit * (1_000_000 // len(unit))),
    }


def main() -> None:
    docs = documents()
    for name, (lang, text) in docs.items():
        ms = _median_ms(functools.partial(_diag.find_issues, text, lang))
        print(f"find_issues  {name:26s} {len(text) / 1e6:5.2f} MB  {ms:8.1f} ms")
    lang, text = docs["broken JSON (2 errors)"]
    issue = _diag.find_issues(text, lang)[0]
    ms = _median_ms(lambda: rules_fix(text, lang, issue), 3)
    print(f"rules_fix    one issue, 1 MB JSON                {ms:8.1f} ms")
    ms = _median_ms(lambda: rules_fix(text, lang, None), 3)
    print(f"rules_fix    fix all, 1 MB JSON                  {ms:8.1f} ms")


if __name__ == "__main__":
    main()
