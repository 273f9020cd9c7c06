"""Measured recovery: real code spans cut from installed sources, given back the way chat models garble them.

For each span the ideal answer is the cut text itself. ``clean_completion`` must leave the ideal answer intact
and recover it from the usual chat-model wrappings (fences, prose, turn tokens, marker echoes, an echo of the
cursor line, the document's next lines repeated, indentation restarted from column 0). Corpora: the Python
standard library, and JavaScript / C++ shipped inside torch (a dependency, located without importing it). The
rates are printed with ``pytest -s`` and recorded in docs/prompting.md.
"""

from __future__ import annotations

import importlib.util
import random
import sysconfig
from collections import Counter
from pathlib import Path

import pytest

from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.context import CompletionPlan, CursorContext, build_context, plan_completion
from dgemma_lsp.lsp.postprocess import clean_completion

STDLIB = Path(sysconfig.get_paths()["stdlib"])
PY_FILES = ["textwrap.py", "json/encoder.py", "json/decoder.py", "csv.py", "shlex.py", "string.py", "heapq.py",
            "bisect.py", "fnmatch.py", "glob.py", "calendar.py", "difflib.py"]  # fmt: skip


def _torch_dir() -> Path | None:
    spec = importlib.util.find_spec("torch")
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None


def corpus(language: str) -> list[tuple[str, str]]:
    """(name, text) of the sources for ``language``."""
    if language == "python":
        paths = [STDLIB / f for f in PY_FILES]
    else:
        torch = _torch_dir()
        if torch is None:
            return []
        if language == "javascript":
            paths = [torch / "utils/model_dump/code.js"]
        else:
            paths = sorted((torch / "include/c10/util").glob("*.h"))[:40]
    return [(p.name, p.read_text(encoding="utf-8")) for p in paths if p.exists()]


def _examples(n: int, seed: int = 0, language: str = "python") -> list[tuple[CursorContext, CompletionPlan, str]]:
    """Spans a user could be typing: the rest of a line (single) or 1-4 lines from an indentation (multi)."""
    rng = random.Random(seed)
    texts = corpus(language)
    settings = Settings()
    out = []
    while len(out) < n:
        name, text = rng.choice(texts)
        lines = text.split("\n")
        starts = [0]
        for ln in lines:
            starts.append(starts[-1] + len(ln) + 1)
        i = rng.randrange(1, len(lines) - 3)
        line = lines[i]
        if not line.strip() or line.lstrip().startswith(("#", "//", "/*", "*")) or len(line) > 200:
            continue
        indent = len(line) - len(line.lstrip())
        if rng.random() < 0.6:
            start, end, kind = starts[i] + rng.randrange(indent, len(line)), starts[i] + len(line), "single"
        else:
            j = min(i + rng.randint(1, 4) - 1, len(lines) - 2)
            start, end, kind = starts[i] + indent, starts[j] + len(lines[j]), "multi"
        doc = text[:start] + text[end:]
        ctx = build_context(doc, start, language_id=language, path=name, count_tokens=lambda s: len(s) // 3,
                            max_prefix_tokens=512, max_suffix_tokens=128)  # fmt: skip
        plan = plan_completion(ctx, settings)
        middle = text[start:end] if kind == "single" else text[start:end].rstrip()
        if plan.mode == kind and middle.strip():
            out.append((ctx, plan, middle))
    return out


def _garble(how: str, ctx: CursorContext, middle: str) -> str | None:
    below = [ln for ln in ctx.suffix.split("\n")[1:] if ln.strip()][:2]
    if how == "as is":
        return middle
    if how == "fenced":
        return f"```{ctx.language_id}\n{middle}\n```"
    if how == "prose":
        return f"Here is the missing code:\n\n```{ctx.language_id}\n{middle}\n```\nThis completes it."
    if how == "turn tokens":
        return middle + "<end_of_turn>\n<start_of_turn>user\nmore"
    if how == "marker echo":
        return middle + "<|CURSOR|>"
    if how == "cursor line echo":
        return (ctx.line_prefix.lstrip() if ctx.line_prefix.strip() else ctx.line_prefix) + middle
    if how == "next lines echo":
        return middle + "".join("\n" + ln for ln in below)
    if how == "indent from column 0":
        rest = middle.split("\n")[1:]
        if not rest or not all(ln.startswith(ctx.line_prefix) or not ln.strip() for ln in rest):
            return None  # only spans whose later lines sit at or below the cursor's indentation
        return "\n".join([middle.split("\n")[0], *(ln[len(ctx.line_prefix) :] for ln in rest)])
    raise ValueError(how)


# (garbling, lowest acceptable recovery rate). Measured at seed 0: 98-100% for every garbling except column-0
# restarts (Python ~92%, C++ ~73%, JavaScript ~62%: there a restarted block is often indistinguishable from
# absolute code, and keeping absolute answers intact matters more).
GARBLINGS = [
    ("as is", 0.97),
    ("fenced", 0.97),
    ("prose", 0.97),
    ("turn tokens", 0.97),
    ("marker echo", 0.97),
    ("cursor line echo", 0.95),
    ("next lines echo", 0.95),
    ("indent from column 0", 0.55),
]
COLUMN_ZERO_FLOOR = {"python": 0.85, "cpp": 0.65}


LANGUAGES = ["python", "javascript", "cpp"]


@pytest.fixture(scope="module", params=LANGUAGES)
def examples(request) -> list[tuple[CursorContext, CompletionPlan, str]]:
    if not corpus(request.param):
        pytest.fail(f"no {request.param} sources found (torch is a dependency and ships them)")
    return _examples(300, language=request.param)


@pytest.mark.parametrize(("how", "floor"), GARBLINGS)
def test_recovers_the_cut_code(examples, how: str, floor: float) -> None:
    ok, total = Counter(), Counter()
    for ctx, plan, middle in examples:
        raw = _garble(how, ctx, middle)
        if raw is None:
            continue
        total[plan.mode] += 1
        ok[plan.mode] += clean_completion(raw, ctx, plan) == middle
    assert total, f"{how}: no example could be garbled this way"
    for mode in total:
        rate = ok[mode] / total[mode]
        print(f"{examples[0][0].language_id:10} {how:22} {mode:6} {ok[mode]}/{total[mode]} = {rate:.1%}")
        if how == "indent from column 0":
            floor = COLUMN_ZERO_FLOOR.get(examples[0][0].language_id, floor)
        assert rate >= floor, f"{how} ({mode}): {rate:.1%} < {floor:.0%}"
