"""The real-history ceiling without a server: the server's own region choice and judge over the frozen set, fast.

``next_edit_real.py --mode ceiling`` runs every case through a real ``dgemma-lsp`` (minutes per hundred cases on a
shared 2-core machine). This replays the same pieces in-process: the user's edit recorded as the server records a
``didChange`` (:meth:`EditHistory.observe`), :func:`~dgemma_lsp.lsp.next_edit.choose_region` with the product's
canvas (``canvasLength`` 256, so regions of up to 409 tokens of the embedded model's tokenizer), the launcher's
scripted right answer for that region, :func:`clean_region` and :func:`judge` (the ceiling's gate is 0, so the
confidence gates never refuse). It agrees with the server's ceiling on the outcome of nearly every case (it skips the
transport and the canvas itself); each miss gets a cause::

    python bench/next_edit_real_offline.py --split dev            # tables and the causes
    python bench/next_edit_real_offline.py --split dev --show outside --limit 50   # one cause's cases in the first 50

Causes of a change not answered exactly: ``outside`` (no target hunk lies in the region), ``cut`` (some hunks in the
region, others outside it although the target's lines fit in one region), ``spread`` (the target's lines need
more than one region's tokens), ``judge: ...`` (the right answer reached the judge and was refused), ``edge`` (a hunk
crosses the region's edge), ``dropped`` (the judge kept the answer but not all of it: whitespace-only hunks).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from next_edit_real import apply, outcome, position, shift, trimmed  # noqa: E402
from next_edit_real_cases import load  # noqa: E402

CANVAS = 256  # the product's canvasLength
NEXT_EDIT_LINES = 12  # the product's nextEditLines


def counter():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer

    from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR

    tok = Tokenizer.from_file(str(Path(SMALL_MODEL_DIR) / "tokenizer.json"))
    cache: dict[str, int] = {}

    def count(text: str) -> int:
        n = cache.get(text)
        if n is None:
            n = cache[text] = len(tok.encode(text, add_special_tokens=False).ids) if text else 0
        return n

    return count


def answer_for(text: str, want: str, first: int, last: int) -> str:
    """The launcher's scripted answer (tests/support/lsp_launcher.py ``target_answer``) for lines first..last."""
    a, b = text.split("\n"), want.split("\n")
    lines = a[first : last + 1]
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(ops):
        if tag != "equal" and first <= i1 and i2 <= last + 1 and (i1 <= last or i2 > i1):
            lines[i1 - first : i2 - first] = b[j1:j2]
    return "\n".join(lines)


def replay(case: dict, files: dict[str, str], count, cap: int) -> dict:  # type: ignore[no-untyped-def]
    from dgemma_lsp.lsp.documents import Document
    from dgemma_lsp.lsp.edit_history import EditHistory
    from dgemma_lsp.lsp.next_edit import choose_region, clean_region, join_windows, judge_windows
    from dgemma_lsp.lsp.text import LineIndex

    old = files[case["file"]]
    user = trimmed(old, tuple(case["edit"]))
    targets = shift([tuple(e) for e in case["target"]], tuple(case["edit"]))
    uri = "file:///real/" + case["path"]
    doc = Document(uri, "python", 1, LineIndex(old))
    history = EditHistory()
    sl, sc = position(old, user[0])
    el, ec = position(old, user[1])
    history.observe(uri, doc.index, sl, el, user[2], lambda: doc.apply_change((sl, sc), (el, ec), user[2]))
    text = doc.text
    target = apply(text, targets)
    cursor = position(text, user[0] + len(user[2]))[0]
    windows, _ = choose_region(doc, cursor, history.edits(uri), lines=NEXT_EDIT_LINES, count_tokens=count, cap=cap)
    norm = join_windows([w.text for w in windows])
    answer = join_windows([answer_for(text, target, w.first_line, w.last_line) for w in windows])
    edits, why = judge_windows(text, windows, clean_region(answer, norm), "python")
    got = apply(text, [(e.start, e.end, e.new_text) for e in edits])
    out = outcome(text, got, targets, target)
    tl = sorted({position(text, a)[0] for a, _, _ in targets} | {position(text, b)[0] for _, b, _ in targets})
    cause = ""
    if case["kind"] != "none" and out != "exact":
        inside = [x for x in tl if any(w.first_line <= x <= w.last_line for w in windows)]
        if why is not None and why != "no change":
            cause = "judge: " + why.split(":")[0].split(" (")[0]
        elif not inside:
            cause = "outside"
        elif len(inside) < len(tl):
            span = text.split("\n")[tl[0] : tl[-1] + 1]
            cause = "cut" if count("\n".join(span)) <= cap * 4 // 5 else "spread"
        elif why is None and out in ("partial", "wrong"):
            cause = "dropped"
        else:
            cause = "edge"
    return {
        "id": case["id"],
        "kind": case["kind"],
        "split": case["split"],
        "outcome": out,
        "reason": why,
        "cause": cause,
        "windows": [[w.first_line, w.last_line] for w in windows],
        "cursor": cursor,
        "target_lines": tl,
    }


def report(rows: list[dict]) -> list[str]:
    ch = [r for r in rows if r["kind"] != "none"]
    none = [r for r in rows if r["kind"] == "none"]
    c = Counter(r["outcome"] for r in ch)
    out = [
        f"changes {len(ch)}: exact {c['exact']} ({100 * c['exact'] / max(1, len(ch)):.0f} %), partial {c['partial']}, "
        f"wrong {c['wrong']}, silent {c['silent']}; none {len(none)}: offers {sum(r['outcome'] != 'silent' for r in none)}"
    ]
    causes = Counter(r["cause"] for r in ch if r["cause"])
    out.append("causes: " + ", ".join(f"{k} {v}" for k, v in causes.most_common()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("dev", "held", "all"), default="dev")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--show", help="print the cases of this cause (or outcome)")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    files, cases = load()
    cases = [c for c in cases if a.split == "all" or c["split"] == a.split]
    if a.limit:
        cases = cases[: a.limit]
    count = counter()
    cap = max(8, min(2 * CANVAS, 4096))
    rows = [replay(c, files, count, cap) for c in cases]
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    if a.show:
        shown = [r for r in rows if r["cause"].startswith(a.show) or (not r["cause"] and r["outcome"] == a.show)]
        for r in shown:
            print(json.dumps(r))
    for split in ("dev", "held"):
        rs = [r for r in rows if r["split"] == split]
        if rs:
            print(f"{split} ({len(rs)} cases)")
            print("\n".join(report(rs)))


if __name__ == "__main__":
    main()
