"""Model-driven repair: the real tiny DiffusionGemma through the transformers backend, plus scripted model
answers (a fake *generate* below model_fix, named as such) for the outcomes random weights cannot produce."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from dgemma_lsp.backend.contract import BackendError, CanvasEvent, CanvasRequest, Committed, Done, Stats
from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.diagnostics import find_issues
from dgemma_lsp.lsp.repair import complete_table, model_fix, repair, revalidate

BROKEN = '{\n  "name": "x",\n  "tags": ["a", "b",],\n  "n": 1\n}\n'
FIXED = '{\n  "name": "x",\n  "tags": ["a", "b"],\n  "n": 1\n}\n'


@pytest.fixture(scope="module")
def tiny_settings(tiny_checkpoint: Path) -> Settings:
    # few steps keep the random-weight model quick on a 2-core CPU; every attempt is still a real generation
    return Settings(model=str(tiny_checkpoint), device="cpu", denoising_steps=2, repair_attempts=3, seed=0)


@pytest.fixture(scope="module")
def tiny_backend(tiny_settings: Settings) -> Iterator[object]:
    from dgemma_lsp.backend.transformers_backend import TransformersBackend

    backend = TransformersBackend.from_settings(tiny_settings)
    asyncio.run(backend.start())
    yield backend
    asyncio.run(backend.aclose())


# -- the real tiny model (random weights: its answers are garbage, and garbage must never be offered) ----------


async def test_tiny_model_garbage_is_never_offered(tiny_backend, tiny_settings: Settings) -> None:
    issue = find_issues(BROKEN, "json")[0]
    trace: list[dict] = []
    fix = await model_fix(
        BROKEN,
        "json",
        issue,
        tiny_backend.generate,
        settings=tiny_settings,
        tokenizer=tiny_backend.tokenizer,
        trace=trace,
    )
    assert fix is None
    assert len(trace) == 3  # one real generation per attempt
    assert all(isinstance(r["output"], str) and r["reason"] for r in trace)
    assert [r["rng_seed"] for r in trace] == [0, 1, 2]  # another seed each time
    assert [r["steps"] for r in trace] == [2, 4, 6]  # and more denoising steps
    # the lines before the broken one were pinned: the backend kept them verbatim in every answer
    assert all(r["output"].startswith('{\n  "name": "x",\n') for r in trace)


async def test_auto_mode_answers_with_the_rules_without_calling_the_model(tiny_backend, tiny_settings) -> None:
    issue = find_issues(BROKEN, "json")[0]
    trace: list[dict] = []
    fixes = await repair(
        BROKEN,
        "json",
        issue,
        mode="auto",
        generate=tiny_backend.generate,
        settings=tiny_settings,
        tokenizer=tiny_backend.tokenizer,
        trace=trace,
    )
    assert trace == []  # the deterministic fix validated: no generation was started
    assert [f.kind for f in fixes] == ["rules"] and "deterministic" in fixes[0].title
    assert fixes[0].apply(BROKEN) == FIXED


async def test_model_mode_offers_nothing_when_the_model_fails(tiny_backend, tiny_settings: Settings) -> None:
    fixes = await repair(
        BROKEN,
        "json",
        None,
        mode="model",
        generate=tiny_backend.generate,
        settings=tiny_settings,
        tokenizer=tiny_backend.tokenizer,
    )
    assert fixes == []


async def test_complete_table_with_the_tiny_model_falls_back_to_padding(tiny_backend, tiny_settings) -> None:
    doc = "# T\n\n| a | b | c |\n| 1 |\n| 2 | 3 |\n\nend\n"
    fixes = await complete_table(
        doc,
        doc.index("| 1"),
        generate=tiny_backend.generate,
        settings=tiny_settings,
        attempts=2,
        tokenizer=tiny_backend.tokenizer,
    )
    assert [f.kind for f in fixes] == ["rules"]
    assert fixes[0].apply(doc) == "# T\n\n| a | b | c |\n| --- | --- | --- |\n| 1 |  |  |\n| 2 | 3 |  |\n\nend\n"


# -- scripted answers (fake generate, below the layer under test) ------------------------------------------------


class FakeGenerate:
    """Fake model: answers each request with the next scripted text (and records the requests)."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[CanvasRequest] = []

    async def __call__(self, req: CanvasRequest) -> AsyncIterator[CanvasEvent]:
        self.requests.append(req)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        yield Committed(0, req.max_denoising_steps, answer)
        yield Done(answer, Stats(backend="fake"))


async def test_a_valid_answer_on_the_second_attempt_becomes_a_minimal_model_fix() -> None:
    issue = find_issues(BROKEN, "json")[0]
    window_fixed = FIXED  # the window is the whole (small) document here
    fake = FakeGenerate('{\n  "name": "x",\n  "tags": ["a" "b"]]\n', window_fixed)
    fix = await model_fix(BROKEN, "json", issue, fake, attempts=3, settings=Settings(seed=7, denoising_steps=4))
    assert fix is not None and fix.kind == "model" and "DiffusionGemma" in fix.title
    assert "attempt 2/3" in fix.detail
    assert [r.rng_seed for r in fake.requests] == [7, 8]
    comma = BROKEN.index(",]")
    assert [(e.start, e.end, e.new_text) for e in fix.edits] == [(comma, comma + 1, "")]
    assert revalidate(BROKEN, fix, "json") is None


async def test_a_model_fix_that_also_reindents_edits_only_what_the_fix_needs() -> None:
    """The small model sometimes fixes the comma and re-indents a line (``"  "`` -> ``" "``): valid, values kept,
    but the user would see whitespace edits they did not ask for. The offered fix is the comma alone."""
    issue = find_issues(BROKEN, "json")[0]
    reindented = '{\n "name": "x",\n  "tags": ["a", "b"],\n "n": 1\n}\n'
    fix = await model_fix(BROKEN, "json", issue, FakeGenerate(reindented), attempts=1, settings=Settings())
    comma = BROKEN.index(",]")
    assert fix is not None and [(e.start, e.end, e.new_text) for e in fix.edits] == [(comma, comma + 1, "")]
    assert fix.apply(BROKEN) == FIXED and revalidate(BROKEN, fix, "json") is None


def test_layout_is_restored_only_when_the_result_still_validates() -> None:
    from dgemma_lsp.lsp.repair.model import _without_layout_changes, broken_span

    broken = '{\n  "a": [1, 2,],\n  "b": nul l\n}'
    answer = '{\n "a": [1, 2],\n "b": null\n}'  # the space in "nul l" is whitespace, and the fix needs it gone
    assert _without_layout_changes(broken, answer, "json", broken_span(broken, "json", None)) is None
    text, reindented = BROKEN, '{\n "name": "x",\n  "tags": ["a", "b"],\n  "n": 1\n}\n'
    assert _without_layout_changes(text, reindented, "json", broken_span(text, "json", None)) == FIXED
    assert _without_layout_changes(text, FIXED, "json", broken_span(text, "json", None)) is None  # nothing to undo


async def test_attempts_sample_cool_then_the_last_at_completion_temperatures() -> None:
    """A repair keeps nearly all it is given, so its attempts sample cooler (repair_t_min/max) than completions;
    the last of three uses the completion temperatures, a different kind of try."""
    issue = find_issues(BROKEN, "json")[0]
    fake = FakeGenerate(BROKEN, BROKEN, BROKEN)  # unchanged answers: all three attempts run
    settings = Settings(seed=0, denoising_steps=4, t_min=0.4, t_max=0.8, repair_t_min=0.1, repair_t_max=0.3)
    assert await model_fix(BROKEN, "json", issue, fake, attempts=3, settings=settings) is None
    assert [(r.t_min, r.t_max) for r in fake.requests] == [(0.1, 0.3), (0.1, 0.3), (0.4, 0.8)]
    one = FakeGenerate(BROKEN)
    await model_fix(BROKEN, "json", issue, one, attempts=1, settings=settings)
    assert [(r.t_min, r.t_max) for r in one.requests] == [(0.1, 0.3)]


async def test_seed_canvas_and_pins_cover_the_text_before_the_broken_span(tiny_backend) -> None:
    issue = find_issues(BROKEN, "json")[0]
    fake = FakeGenerate("garbage")
    await model_fix(BROKEN, "json", issue, fake, attempts=1, settings=Settings(), tokenizer=tiny_backend.tokenizer)
    (req,) = fake.requests
    tok = tiny_backend.tokenizer
    head = tok.encode('{\n  "name": "x",\n', add_special_tokens=False)
    assert list(req.seed_canvas[: len(head)]) == head
    assert list(req.pinned) == list(range(len(head)))
    assert tok.decode(req.seed_canvas) == BROKEN
    assert req.canvas_length >= len(req.seed_canvas)
    assert "Reply with the corrected excerpt only" in req.messages[0].content


async def test_answers_that_change_values_or_text_outside_the_span_are_refused() -> None:
    broken = '{\n  $id: "urn:x",\n  "p": "C:\\\\Users"\n}\n'
    issue = find_issues(broken, "json")[0]
    fake = FakeGenerate(
        '{\n  "id": "urn:x",\n  "p": "C:\\\\Users"\n}\n',  # json-repair's $id -> id
        '{\n  "$id": "urn:x",\n  "p": "C:Users"\n}\n',  # fixes the key but rewrites a line outside the span
        '{\n  "$id": "urn:x",\n  "p": "C:\\\\Users"\n}\n',  # right
    )
    trace: list[dict] = []
    fix = await model_fix(broken, "json", issue, fake, attempts=3, settings=Settings(), trace=trace)
    assert fix is not None and json.loads(fix.apply(broken)) == {"$id": "urn:x", "p": "C:\\Users"}
    assert "$id" in trace[0]["reason"] or "id" in trace[0]["reason"]
    assert trace[1]["reason"] is not None and trace[2]["reason"] is None


async def test_fenced_answers_are_unwrapped_and_backend_errors_retried() -> None:
    issue = find_issues(BROKEN, "json")[0]
    fake = FakeGenerate(BackendError("boom"), "```json\n" + FIXED + "```")
    trace: list[dict] = []
    fix = await model_fix(BROKEN, "json", issue, fake, attempts=2, settings=Settings(), trace=trace)
    assert fix is not None and fix.apply(BROKEN) == FIXED
    assert "boom" in trace[0]["reason"]


async def test_json_fence_in_markdown_shows_the_model_json_only() -> None:
    doc = '# Config\n\n```json\n{"a": 1,}\n```\n\nMore text.\n'
    issue = find_issues(doc, "markdown")[0]
    assert issue.language == "json"
    fake = FakeGenerate('{"a": 1}\n')
    fix = await model_fix(doc, "markdown", issue, fake, attempts=1, settings=Settings())
    assert "```" not in fake.requests[0].messages[1].content.split("repair:\n", 1)[1]
    assert fix is not None and fix.apply(doc) == doc.replace("1,}", "1}")


async def test_whole_document_model_fix_and_rules_mode_never_calls_the_model() -> None:
    fake = FakeGenerate(FIXED)
    fixes = await repair(BROKEN, "json", None, mode="model", generate=fake, settings=Settings())
    assert [f.kind for f in fixes] == ["model"] and fixes[0].apply(BROKEN) == FIXED
    never = FakeGenerate()  # no answers: any call would fail the test
    fixes = await repair(BROKEN, "json", None, mode="rules", generate=never, settings=Settings())
    assert [f.kind for f in fixes] == ["rules"] and never.requests == []


@pytest.mark.parametrize("mode", ["model", "auto"])
async def test_model_answers_that_parse_but_change_the_meaning_are_never_offered(mode: str) -> None:
    """The meaning-preservation gate holds for the model as for the rules: a valid answer that changes a value
    (``"b": "x"`` -> ``"y"``), invents a member or drops one is refused in ``model`` and ``auto`` (where the rules
    found nothing), and what is offered passes the server's and the CLI's final check (``checked_output``)."""
    from dgemma_lsp.lsp.repair import checked_output

    broken = '{\n  "a": 1\n  "b": "x" "c"\n}\n'  # two problems the rules leave (no single keystroke explains them)
    wrong = [
        '{\n  "a": 1,\n  "b": "y",\n  "c": null\n}\n',  # a value changed, a member invented
        '{\n  "a": 1,\n  "b": "x"\n}\n',  # "c" dropped
        '{\n  "a": 2,\n  "b": "x",\n  "c": 3\n}\n',
    ]
    fake = FakeGenerate(*(wrong * 8))
    trace: list[dict] = []
    fixes = await repair(broken, "json", None, mode=mode, generate=fake, settings=Settings(), trace=trace)
    assert all(checked_output(broken, f, "json", whole=True)[0] is not None for f in fixes)
    for f in fixes:  # whatever is offered keeps "a": 1 and "b": "x" and invents nothing
        got = json.loads(f.apply(broken))
        assert got.get("a") == 1 and got.get("b") == "x" and set(got) <= {"a", "b", "c"}
    assert not any(f.kind == "model" for f in fixes)
    assert fake.requests and all(r["reason"] for r in trace if "reason" in r)


async def test_whole_document_failures_get_one_windowed_attempt_per_problem() -> None:
    """Two whole-document answers that do not validate, then the problem's window: its answer becomes the fix."""
    fake = FakeGenerate('{\n  "name": "x"\n', '{\n  "name": "y",\n  "tags": ["a", "b"],\n  "n": 1\n}\n', FIXED)
    trace: list[dict] = []
    fixes = await repair(
        BROKEN, "json", None, mode="model", generate=fake, settings=Settings(repair_attempts=2), trace=trace
    )
    assert [f.kind for f in fixes] == ["model"] and fixes[0].apply(BROKEN) == FIXED
    assert len(fake.requests) == 3 and [bool(r["reason"]) for r in trace] == [True, True, False]
    assert "document" in fake.requests[0].messages[0].content and "excerpt" in fake.requests[2].messages[0].content


async def test_complete_table_model_fill_is_checked_cell_by_cell() -> None:
    doc = "| a | b |\n| 1 |\n| 2 | 3 |\n"
    good = "| a | b |\n| --- | --- |\n| 1 | one |\n| 2 | 3 |\n"
    changed = "| a | b |\n| --- | --- |\n| 9 | one |\n| 2 | 3 |\n"
    fake = FakeGenerate(changed, good)
    trace: list[dict] = []
    fixes = await complete_table(doc, 0, generate=fake, settings=Settings(), attempts=2, trace=trace)
    assert [f.kind for f in fixes] == ["model", "rules"]
    assert fixes[0].apply(doc) == good
    assert "changed" in trace[0]["reason"]


async def test_a_crashing_backend_offers_nothing_in_model_mode() -> None:
    fake = FakeGenerate(RuntimeError("CUDA error"), RuntimeError("CUDA error"))
    trace: list[dict] = []
    fixes = await repair(
        BROKEN, "json", None, mode="model", generate=fake, settings=Settings(repair_attempts=2), trace=trace
    )
    assert fixes == [] and len(trace) == 2
    assert all("CUDA error" in r["reason"] for r in trace)


async def test_large_document_fix_all_goes_window_by_window() -> None:
    rows = ",\n".join(f'  "k{i}": {i}' for i in range(400))
    broken = "{\n" + rows.replace('"k10": 10,', '"k10": 10', 1).replace('"k300": 300,', '"k300": 300,,', 1) + "\n}\n"
    assert len(broken) > 4000 and len(find_issues(broken, "json")) == 2

    class WindowFixer(FakeGenerate):
        """Fake model that answers each window with the deterministic repair of that window's text."""

        async def __call__(self, req: CanvasRequest) -> AsyncIterator[CanvasEvent]:
            self.requests.append(req)
            excerpt = req.messages[1].content.split("repair:\n", 1)[1]
            answer = excerpt.replace('"k10": 10\n', '"k10": 10,\n').replace(",,", ",")
            yield Done(answer, Stats(backend="fake"))

    fake = WindowFixer()
    fix = await model_fix(broken, "json", None, fake, attempts=1, settings=Settings())
    assert fix is not None and fix.kind == "model" and len(fake.requests) == 2
    assert all(len(r.messages[1].content) < 1000 for r in fake.requests)  # windows, not the whole document
    assert json.loads(fix.apply(broken)) == {f"k{i}": i for i in range(400)}
