"""Where a next edit looks (lsp/next_edit_sites.py) and how an answer over several windows is judged: what a user
notices is which lines the suggestion can reach and which of the right answer's changes it keeps."""

from __future__ import annotations

from dgemma_lsp.lsp.documents import Document
from dgemma_lsp.lsp.edit_history import EditHistory, EditRecord
from dgemma_lsp.lsp.next_edit import (
    REGION_GAP,
    Region,
    choose_region,
    clean_region,
    join_windows,
    judge,
    judge_windows,
)
from dgemma_lsp.lsp.next_edit_sites import Site, candidate_sites, pick_site_windows
from dgemma_lsp.lsp.text import LineIndex


def doc_of(text: str) -> Document:
    return Document("file:///s.py", "python", 1, LineIndex(text))


def tokens(text: str) -> int:
    return len(text) // 4


def filler(n: int, start: int = 0) -> str:
    return "".join(f"value_{i} = compute_something({i}, {i + 1})\n" for i in range(start, start + n))


def windows_of(doc: Document, cursor: int, sites: list[Site], max_tokens: int = 300) -> list[tuple[int, int]]:
    return pick_site_windows(doc, cursor, sites, lines=12, count_tokens=tokens, max_tokens=max_tokens)


def test_a_site_near_the_cursor_wins_over_a_denser_cluster_far_away():
    doc = doc_of(filler(400))
    near = [Site(20, "same line")]
    far = [Site(300 + k, "old word x") for k in range(4)]
    first = windows_of(doc, 10, far + near, max_tokens=120)
    assert any(a <= 20 <= b for a, b in first), first  # what the user just changed continues nearby


def test_the_use_of_a_removed_import_is_reached_a_thousand_lines_below():
    text = "from .util import is_ascii, strip\n" + filler(1000) + "ok = is_ascii(x)\n"
    doc = doc_of(text)
    history = EditHistory()
    history.observe(doc.uri, doc.index, 0, 0, "", lambda: doc.index.replace(17, 27, ""))  # "is_ascii, " removed
    use = doc.text.split("\n").index("ok = is_ascii(x)")
    windows, sites = choose_region(doc, 0, history.edits(doc.uri), lines=12, count_tokens=tokens, cap=512)
    assert any(s.line == use for s in sites)
    assert any(w.first_line <= use <= w.last_line for w in windows)


def test_far_apart_sites_share_one_region_as_several_windows():
    text = filler(40) + "a = old_name(1)\n" + filler(200, 40) + "b = old_name(2)\n" + filler(40, 240)
    doc = doc_of(text)
    lines = text.split("\n")
    calls = [i for i, x in enumerate(lines) if "old_name(" in x]
    ws = windows_of(doc, calls[0] - 5, [Site(c, "old word old_name") for c in calls])
    assert len(ws) == 2 and all(any(a <= c <= b for a, b in ws) for c in calls), ws


def test_a_window_ends_where_the_statement_it_opens_closes():
    text = filler(30) + "warn(\n    'old text',\n    Warning,\n    2,\n    3,\n)\n" + filler(30, 30)
    doc = doc_of(text)
    site = text.split("\n").index("warn(")
    (ws,) = [windows_of(doc, site, [Site(site, "same line")], max_tokens=40)]
    assert any(a <= site and b >= site + 5 for a, b in ws), ws  # the call's closing line is in the window


def test_a_name_moved_into_an_f_string_is_not_a_removed_name():
    doc = doc_of('x = "col {}".format(n)\ny = n + 1\n')
    edit = EditRecord(0, 'x = "col {}".format(n)', 'x = f"col {n}"', 0.0, 0)
    whys = [s.why for s in candidate_sites(doc, [edit])]
    assert "old word n" not in whys  # n is still there (inside the f-string): line 1 is no site for the change


def region_of(text: str, first: int, last: int) -> Region:
    d = doc_of(text)
    s, e = d.index.line_start(first), d.index.line_end(last)
    return Region(s, e, first, last, text[s:e])


def test_the_whitespace_of_a_real_change_is_kept_and_lone_whitespace_is_not():
    text = "total = combine(first,\n                second)\nother = 1\nmore = 2\nlast = 3\n"
    r = region_of(text, 0, 4)
    want = "total = combine(first, second, third)\nother = 1\nmore = 2\nlast = 3"
    edits, why = judge(text, r, want, "python")
    got = text
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        got = got[: e.start] + e.new_text + got[e.end :]
    assert why is None and got == want + "\n"  # the call joined onto one line, as the right answer has it
    noisy = "total = combine(first,\n                second, third)\nother = 1\nmore = 2\nlast = 3  "
    edits, why = judge(text, r, noisy, "python")
    assert why is None and all(e.new_text.strip() for e in edits)  # the trailing spaces two lines down: dropped


def test_an_answer_over_several_windows_is_judged_window_by_window():
    text = filler(3) + "a = old(1)\n" + filler(20, 3) + "b = old(2)\n" + filler(3, 23)
    d = doc_of(text)
    lines = text.split("\n")
    i, j = lines.index("a = old(1)"), lines.index("b = old(2)")
    w1, w2 = region_of(text, i - 1, i + 1), region_of(text, j - 1, j + 1)
    new = join_windows([w1.text.replace("old(1)", "new(1)"), w2.text.replace("old(2)", "new(2)")])
    edits, why = judge_windows(d.text, [w1, w2], new, "python")
    assert why is None and len(edits) == 2
    assert judge_windows(d.text, [w1, w2], new.replace(REGION_GAP, ""), "python")[1] == (
        "invalid: the answer lost a window mark"
    )
    only_second = join_windows([w1.text, w2.text.replace("old(2)", "new(2)")])
    edits, why = judge_windows(d.text, [w1, w2], only_second, "python")
    assert why is None and len(edits) == 1 and edits[0].start > w2.start
    broken = join_windows([w1.text.replace("old(1)", "old(1"), w2.text])
    assert "Python" in (judge_windows(d.text, [w1, w2], broken, "python")[1] or "")


def test_a_region_holding_replacement_characters_repeated_as_it_is_offers_nothing():
    """A test file with U+FFFD in a string: the answer "unchanged" must not turn into deleting them (a false
    suggestion the real-history set found), while junk the answer adds is still dropped."""
    text = 'x = 1\nassert got == "\ufffd\ufffd"\ny = 2\n'
    r = region_of(text, 0, 2)
    assert clean_region(r.text, r.text) == r.text
    assert judge(text, r, clean_region(r.text, r.text), "python") == ([], "no change")
    assert clean_region("x = 1\ufffd", "x = 1") == "x = 1"


def test_a_window_reaches_further_below_its_site_than_above_it():
    # A change runs on downwards: the lines after the one the user would change next are more likely to change than
    # the ones before it, so a window the canvas limits holds about twice as many lines below its site as above.
    doc = doc_of(filler(400))
    [(a, b)] = windows_of(doc, 200, [Site(200, "same line")], max_tokens=300)
    assert a < 200 < b
    assert b - 200 >= 2 * (200 - a) - 2, (a, b)


def test_a_window_grows_above_once_it_reaches_the_end_of_the_document():
    doc = doc_of(filler(60))
    [(a, b)] = windows_of(doc, 55, [Site(55, "same line")], max_tokens=300)
    assert b == 60 and b - a + 1 > 20, (a, b)  # the budget is not left unused at the bottom


def test_with_no_site_the_region_is_mostly_below_the_cursor():
    doc = doc_of(filler(400))
    history = EditHistory()
    [w], sites = choose_region(doc, 200, history.edits(doc.uri), lines=12, count_tokens=tokens, cap=512)
    assert not sites
    assert w.first_line <= 200 <= w.last_line
    assert w.last_line - 200 >= 4 * (200 - w.first_line), (w.first_line, w.last_line)
