"""The pure pieces of next-edit suggestions: edit history, region, cleaning, the judge, the prompt."""

from __future__ import annotations

from dgemma_lsp.lsp.context import CompletionPlan, CursorContext
from dgemma_lsp.lsp.documents import Document
from dgemma_lsp.lsp.edit_history import MAX_EDITS, EditHistory
from dgemma_lsp.lsp.next_edit import Region, build_next_edit_messages, clean_region, judge, pick_region, to_copilot
from dgemma_lsp.lsp.next_edit import Suggestion as NextEdit
from dgemma_lsp.lsp.prompt import build_infill_messages
from dgemma_lsp.lsp.repair import Edit
from dgemma_lsp.lsp.text import LineIndex


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def doc_of(text: str, uri: str = "file:///u.py", lang: str = "python") -> Document:
    return Document(uri, lang, 1, LineIndex(text))


def type_into(h: EditHistory, doc: Document, line: int, col: int, text: str) -> None:
    for i, ch in enumerate(text):
        a = doc.index.offset(line, col + i)
        h.observe(doc.uri, doc.index, line, line, ch, lambda a=a, ch=ch: doc.index.replace(a, a, ch))


def test_keystrokes_on_the_same_line_merge_into_one_edit():
    h, doc = EditHistory(Clock()), doc_of("def area(r):\n    return r\n")
    a = doc.index.offset(0, 9)
    h.observe(doc.uri, doc.index, 0, 0, "", lambda: doc.index.replace(a, a + 1, ""))
    type_into(h, doc, 0, 9, "radius")
    edits = h.edits(doc.uri)
    assert len(edits) == 1
    assert (edits[0].old, edits[0].new, edits[0].line) == ("def area(r):", "def area(radius):", 0)
    assert edits[0].removed_words() == ["r"] and edits[0].added_words() == ["radius"]


def test_typed_then_deleted_leaves_no_edit_and_later_edits_are_separate():
    clock = Clock()
    h, doc = EditHistory(clock), doc_of("x = 1\ny = 2\n")
    type_into(h, doc, 0, 5, "0")
    a = doc.index.offset(0, 5)
    h.observe(doc.uri, doc.index, 0, 0, "", lambda: doc.index.replace(a, a + 1, ""))
    assert h.edits(doc.uri) == []
    type_into(h, doc, 0, 5, "0")
    clock.t += 60  # a pause: the next change is another edit even on the same line
    type_into(h, doc, 0, 6, "0")
    assert [e.new for e in h.edits(doc.uri)] == ["x = 10", "x = 100"]


def test_multi_line_insert_and_line_shift_of_older_edits():
    clock = Clock()
    h, doc = EditHistory(clock), doc_of("a\nb\nc\n")
    type_into(h, doc, 2, 1, "!")  # line 2: "c" -> "c!"
    clock.t += 60
    a = doc.index.offset(0, 1)
    h.observe(doc.uri, doc.index, 0, 0, "\nnew", lambda: doc.index.replace(a, a, "\nnew"))
    first, second = h.edits(doc.uri)
    assert first.line == 3 and doc.index.line(first.line) == "c!"  # moved down by the inserted line
    assert (second.old, second.new) == ("a", "a\nnew")


def test_history_is_bounded_and_rendered_newest_first_within_the_budget():
    clock = Clock()
    h, doc = EditHistory(clock), doc_of("\n".join(f"v{i} = {i}" for i in range(20)) + "\n")
    for i in range(MAX_EDITS + 4):
        clock.t += 60
        type_into(h, doc, i, len(doc.index.line(i)), "0")
    assert len(h.edits(doc.uri)) == MAX_EDITS
    full = h.render(doc.uri, len, 10_000)
    assert full.count("@@") == MAX_EDITS and full.index("v4 = 40") < full.index("v11 = 110")
    small = h.render(doc.uri, len, 50)
    assert small.count("@@") == 1 and "+v11 = 110" in small  # only the newest fits
    assert h.render(doc.uri, len, 0) == ""
    h.forget(doc.uri)
    assert h.edits(doc.uri) == []


def test_region_is_whole_lines_around_the_cursor_and_fits_the_canvas():
    doc = doc_of("".join(f"line{i} = {i}\n" for i in range(40)))
    r = pick_region(doc, 20, lines=12, count_tokens=len, max_tokens=10_000)
    assert (r.first_line, r.last_line) == (16, 27) and r.text == doc.text[r.start : r.end]
    assert r.text.startswith("line16") and r.text.endswith("line27 = 27")
    small = pick_region(doc, 20, lines=12, count_tokens=len, max_tokens=40)
    assert small.first_line <= 20 <= small.last_line and len(small.text) <= 40
    top = pick_region(doc, 0, lines=12, count_tokens=len, max_tokens=10_000)
    assert (top.first_line, top.last_line) == (0, 11)


def test_clean_region_unwraps_fences_and_turn_tokens():
    assert clean_region("```python\nx = 2\ny = 3\n```<end_of_turn>", "x = 1\ny = 3") == "x = 2\ny = 3"
    assert clean_region("\n\nx = 2<|/REGION|>\n", "x = 1") == "x = 2"
    assert clean_region("    x = 2", "    x = 1") == "    x = 2"  # indentation kept


def region_of(text: str, first: int, last: int) -> Region:
    d = doc_of(text)
    s, e = d.index.line_start(first), d.index.line_end(last)
    return Region(s, e, first, last, text[s:e])


def test_judge_offers_small_valid_changes_at_several_sites():
    text = "def f(radius):\n    return r * r\n\nprint(f(2))\n"
    r = region_of(text, 0, 3)
    edits, why = judge(text, r, r.text.replace("r * r", "radius * radius"), "python")
    assert why is None and len(edits) == 2 and all(r.start <= e.start <= e.end <= r.end for e in edits)


def test_judge_stays_silent_or_refuses():
    text = "def f(x):\n    return x\n\nprint(f(2))\n"
    r = region_of(text, 0, 3)
    assert judge(text, r, r.text, "python") == ([], "no change")
    assert judge(text, r, r.text.replace("return x", "return x  "), "python")[1].startswith("no change")
    assert judge(text, r, "pass", "python")[1].startswith("too large")
    assert "Python" in judge(text, r, r.text.replace("f(x):", "f(x:"), "python")[1]
    js = '{"a": 1, "b": 2}\n'
    rj = region_of(js, 0, 0)
    assert judge(js, rj, '{"a": 1 "b": 2}', "json")[1].startswith("invalid")
    assert judge(js, rj, '{"a": 1, "b": 3}', "json")[1] is None


def test_prompts_carry_the_edit_history():
    msgs = build_next_edit_messages(
        "import os\n", "x = 1", "\n", language_id="python", path="a.py", history="@@ line 1\n-a\n+b"
    )
    body = msgs[0].content
    assert "<|REGION|>x = 1<|/REGION|>" in body and "Recent edits (oldest first):" in body and "+b" in body
    ctx = CursorContext("x = ", "\n", "x = ", "", "python", "a.py")
    plan = CompletionPlan("single", 8, 0, "end of line")
    assert "Recent edits" not in build_infill_messages(ctx, plan)[0].content  # the trained format, unchanged
    assert "-a\n+b" in build_infill_messages(ctx, plan, "@@ line 1\n-a\n+b")[0].content


def test_copilot_shape_spans_all_sites_with_one_text():
    text = "a = r + r\n"
    d = doc_of(text)
    sug = NextEdit(d.uri, 3, region_of(text, 0, 0), [Edit(4, 5, "x"), Edit(8, 9, "x")], id="ne-1")
    out = to_copilot(d, sug)
    (e,) = out["edits"]
    assert e["text"] == "x + x" and e["range"]["start"] == {"line": 0, "character": 4}
    assert e["range"]["end"] == {"line": 0, "character": 9} and e["textDocument"] == {"uri": d.uri, "version": 3}
    assert e["command"]["arguments"] == ["ne-1"]


def test_related_accepts_repeats_of_the_recent_edits_only():
    from dgemma_lsp.lsp.edit_history import EditRecord
    from dgemma_lsp.lsp.next_edit import related

    text = "def area(radius):\n    return r * r\n    print(circle)\n"
    rename = [EditRecord(0, "def area(r):", "def area(radius):", 0.0, 0)]
    r1 = text.index("r * r")
    assert related(text, [Edit(r1 + 1, r1 + 1, "adius")], rename)  # the same insertion
    assert related(text, [Edit(r1, r1 + 1, "radius")], rename)  # the old name replaced by the new one
    c = text.index("circle")
    assert not related(text, [Edit(c + 2, c + 3, "")], rename)  # "circle" -> "cicle": a fragment "r", not a word
    assert not related(text, [Edit(c, c + 6, "disk")], rename)
    assert not related(text, [Edit(r1 + 1, r1 + 1, "adius")], [])  # no recent edits: nothing to repeat
    dead = [EditRecord(2, "    print(total)\n", "", 0.0, 2)]
    doc = "    total = a + b\n    x = 1\n"
    assert related(doc, [Edit(0, len("    total = a + b\n"), "")], dead)  # its now-dead assignment removed
