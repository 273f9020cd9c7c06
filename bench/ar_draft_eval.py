"""Encoder-head (causal next-token) drafts on the frozen outside completion set, beside the diffusion canvas.

    python bench/ar_draft_eval.py --split dev --limit 100 --threads 1 --json /tmp/ar.json
    python bench/ar_draft_eval.py --split dev --limit 100 --threads 1 --no-canvas      # drafts only (~1 min)
    python bench/ar_draft_eval.py --split dev --limit 100 --threads 1 --seeded 2,4     # + canvases seeded by the draft

An experiment (branch ``ardraft``); the server is unchanged. The embedded model's training objective
(``training/lean.py``) gives every prompt token a next-token loss through the shared ``lm_head``. In the serving
prompt (``lsp/prompt.py``, infill format 2) the code up to the cursor sits inside the prompt, not at its tail::

    ... Code after <|CURSOR|>:\\n```python\\n{suffix}```\\nCode up to <|CURSOR|>:\\n```python\\n{prefix}<|CURSOR|>\\n```\\n{task}

so the causal encoder, run over the prompt's tokens up to the end of ``{prefix}`` (the prompt's own tokens: ``<`` is
always a token of its own, so the prefix's tokens are exactly the ones the model was trained on) predicts the code
after the cursor, having seen the suffix earlier in the prompt (a suffix-first infill, as in training). The draft is
the greedy continuation from there, through the encoder's KV cache, one token a forward:

* stop at the first newline (every kind: for a block, its first line), at ``<eos>`` / a control token, at the
  cursor marker's ``<|`` (the model saying "the cut is here"), or after ``--max-tokens``;
* ``mid`` cases (code after the cursor on its line): stop where the draft reaches that code (stripped);
* **token healing** (``--heal``, on by default; the ``no-heal`` rows are the plain continuation): the prompt's last
  token (and the tokens of a partly typed name before it, up to 3) are taken back and the continuation must spell
  them first (greedy over the tokens compatible with what was taken back), so ``self.na|`` is not stuck with the
  tokenization ``n a`` that training never saw before ``me``.

The draft then goes through ``clean_completion`` with the server's plan and is scored exactly as
``bench/completion_eval.py`` scores the canvas (its ``score``, the closers rule of its ``run_model``). Its confidence
is the mean probability of its tokens (the stopping newline / ``<eos>`` included, the forced healed prefix not), and
a gate curve shows, for thresholds 0.3-0.9, how many drafts it shows and how many of those are exact. Latency: the
cold encode of the prompt up to the cursor (what the canvas's encoder does anyway; the server's prompt cache would
share it) and the greedy steps, on one thread.

``--canvas`` (default on) runs completion_eval's canvas on the same cases in the same process (gate off, the
server's pipeline, ~3 s a case); ``--seeded K,...`` runs the canvas again with the draft's raw text as its seed
(``CanvasRequest.seed_text``; the rest of the canvas noise) and K denoising steps, and scores the draft under the
unseeded canvas's first step (pure noise, prompt alone: the backend's own confidence measure) by one decoder forward.

Results (2026-12-06, 2-core CPU dev machine shared with other work, v10 as shipped (bf16 on this CPU), dev split, all
100 cases (60 Python, 40 TypeScript), one thread for drafts and canvas alike; the test split was not run):
``python bench/ar_draft_eval.py --split dev --limit 100 --threads 1 --seeded 2,4 --json /tmp/ar_dev100s.json``
(drafts and canvas identical to an earlier run without ``--seeded``; the canvas's thread governor is pinned to
``--threads`` here, so its latency is one thread's too, where completion_eval lets it take both cores).

| who | exact | exact line+mid (57) | right prefix | first line, blocks (43) | empty | latency p50 / p90 |
|---|---|---|---|---|---|---|
| canvas (server pipeline, gate off, 16 steps) | 1 | 1 | 7 | 0 | 1 | 1164 / 1939 ms |
| encoder draft, healed | **7** | 6 | 2 | 1 | 0 | 952 / 1320 ms (encode 718, greedy 248 / 640) |
| encoder draft, plain | 3 | 3 | 1 | 0 | 0 | 919 / 1278 ms |
| copy-above | 2 | 1 | 0 | 1 | 69 | - |
| canvas seeded by the healed draft, 2 steps | 3 | 3 | 2 | 1 | 0 | |
| canvas seeded by the healed draft, 4 steps | 5 | 4 | 2 | 1 | 0 | |

All exact drafts are Python (TypeScript 0 of 40 for every method). The canvas's one exact case is also a draft's.
Gate curve of the healed draft's mean token probability, shown / exact: >= 0.3 100/7, 0.4 96/7, 0.5 86/6, 0.6 69/6,
0.7 44/5, 0.8 18/4, 0.9 3/2 (plain: 0.8 16/3). The canvas's own confidence: >= 0.3 9/1, 0.5 3/1, 0.7 1/1.

Seeded canvases keep the draft verbatim in 61 (2 steps) / 62 (4 steps) of 100 cases, lose 4 / 2 of the 7 exact drafts
and make no new exact one; their first-step confidence sees the seed and is no gate (>= 0.8: 49 shown, 2 exact). The
draft scored by the *unseeded* first step (the canvas's confidence measure): median 0.013 on the exact drafts (max
0.041), 0.006 on the wrong ones (max 0.60) — the canvas's first step does not recognise the right line.

Reading: the draft is ~7x the canvas on this set (7 against 1; the documented dev run had 2) but 7 % is still far
from useful, the sample is tiny (7 successes: a 95 % interval of roughly 3-14 %), and the healing (the cursor
marker's ``<`` shares a token with a trailing space or indentation, `` <``, so without it the draft starts from a
tokenization training never saw there) is worth as much as the rest. A gate at 0.8 would show 18 % of the time,
right 4 of 18 — more than the canvas ever shows right, still wrong most of the time it shows. Seeding the canvas with
the draft only loses exact answers. Latency: the draft's encode is the same prompt encode the canvas does (the prompt
up to the cursor is a prefix of the canvas's prompt, so the server's prompt cache would share it); its own cost is
the greedy steps, ~250 ms p50 on one thread for ~9 tokens (one forward a token, with the KV cache).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
# an editable install maps dgemma_lsp.lsp / .backend to its own checkout: point it at this one (a worktree)
for _m in list(sys.modules.values()):
    if getattr(_m, "__name__", "").startswith("__editable__") and isinstance(getattr(_m, "MAPPING", None), dict):
        _m.MAPPING.update(
            {
                "dgemma_lsp": str(ROOT / "dgemma_lsp"),
                "dgemma_lsp.backend": str(ROOT / "backend"),
                "dgemma_lsp.lsp": str(ROOT / "lsp"),
            }
        )

from completion_cases import OUT as DEFAULT_CASES  # noqa: E402
from completion_cases import load_cases  # noqa: E402
from completion_eval import evaluate, load_backend, pick, score  # noqa: E402

_WORD_TAIL = re.compile(r"[A-Za-z0-9_$]+$")
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def context_for(backend: Any, case: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    """The server's context, plan and infill messages for a case (as ``lsp.infill.infill`` builds them)."""
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.context import build_context, plan_completion
    from dgemma_lsp.lsp.prompt import build_infill_messages

    s = Settings()
    ctx = build_context(
        case["text"],
        case["cursor"],
        language_id=case["language_id"],
        path=case["path"],
        count_tokens=backend.count_tokens,
        max_prefix_tokens=s.max_prefix_tokens,
        max_suffix_tokens=s.max_suffix_tokens,
        snippets=(),
        max_snippet_tokens=s.max_snippet_tokens,
    )
    plan = plan_completion(ctx, s)
    return ctx, plan, build_infill_messages(ctx, plan)


def prefix_ids(backend: Any, messages: list[Any]) -> tuple[list[int], str, list[int]]:
    """(the prompt's tokens before the token holding the cursor marker's ``<``, the text of the code before the cursor
    that this token also holds (``" <"``: a trailing space), the whole prompt's tokens)."""
    from dgemma_lsp.backend.chat_tokens import chat_prompt_ids, text_ids
    from dgemma_lsp.lsp.prompt import CURSOR_MARKER

    tok = backend.tokenizer
    full = chat_prompt_ids(tok, [{"role": m.role, "content": m.content} for m in messages])
    mark = text_ids(tok, CURSOR_MARKER[1:] + "\n")  # "|CURSOR|>\n"; the "<" may share a token with the code before
    n = len(mark)
    for i in range(len(full) - n, 0, -1):  # the last marker followed by a newline: the end of "Code up to"
        if full[i : i + n] == mark:
            s = tok.decode([full[i - 1]])
            if s.endswith("<"):
                return full[: i - 1], s[:-1], full
    raise ValueError("cursor marker not found in the prompt's tokens")


class Drafter:
    """Greedy decoding with the encoder (causal) and the shared lm_head, through transformers' KV cache."""

    def __init__(self, backend: Any, max_tokens: int) -> None:
        import torch

        self.torch = torch
        self.model = backend.model
        self.tok = backend.tokenizer
        self.max_tokens = max_tokens
        self.enc = self.model.model.encoder
        self.text_cfg = self.model.config.get_text_config(decoder=True)
        self.softcap = self.text_cfg.final_logit_softcapping
        vocab = self.model.config.text_config.vocab_size
        self.strings = [self.tok.decode([i]) for i in range(vocab)]
        self.special = {int(i) for i in (self.tok.all_special_ids or [])}

    def _logits(self, ids: list[int], cache: Any) -> Any:
        torch = self.torch
        out = self.enc(input_ids=torch.tensor([ids], device=self.model.device), cache=cache)
        h = out.last_hidden_state[0, -1]
        logits = self.model.lm_head(h).float()
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def draft(self, ids: list[int], tail: str, *, heal: bool, stop_text: str) -> dict:
        """Greedy continuation of ``ids`` + ``tail`` (text of the code before the cursor not in ``ids``)."""
        from transformers import DynamicCache

        torch = self.torch
        t0 = time.perf_counter()
        back = 0
        if not heal and tail:
            ids = ids + [int(i) for i in self.tok.encode(tail, add_special_tokens=False)]
        if heal and not tail:
            back = 1
            # the rest of a partly typed name goes back too (up to 3 tokens), so a word is spelled as training saw it
            while (
                back < min(3, len(ids) - 1)
                and _WORD_TAIL.search(self.strings[ids[-back - 1]])
                and _WORD_TAIL.search(self.strings[ids[-back]])
                and not self.strings[ids[-back]][:1].isspace()
            ):
                back += 1
        pending = "".join(self.strings[i] for i in ids[len(ids) - back :]) if back else ""
        pending += tail if heal else ""
        cache = DynamicCache(config=self.text_cfg)
        logits = self._logits(ids[: len(ids) - back], cache)
        t_enc = time.perf_counter() - t0
        text, probs, forced, steps = "", [], pending, 0
        stopped = "max"
        while steps < self.max_tokens:
            p = logits.softmax(-1)
            if forced:
                ok = [
                    i
                    for i, s in enumerate(self.strings)
                    if s and i not in self.special and (s.startswith(forced) or forced.startswith(s))
                ]
                idx = torch.tensor(ok)
                t = int(idx[int(p[idx].argmax())])
            else:
                t = int(p.argmax())
            s = self.strings[t]
            steps += 1
            if forced:
                # a healing token: its probability counts only when it spells more than what is typed
                if s.startswith(forced):
                    s, forced = s[len(forced) :], ""
                else:
                    forced, s = forced[len(s) :], ""
                if not s:
                    logits = self._logits([t], cache)
                    continue
            if t in self.special:
                probs.append(float(p[t]))
                stopped = "eos"
                break
            cand = text + s
            cut = None
            if "\n" in cand:
                cut, stopped = cand.index("\n"), "newline"
            if "<|" in cand and (cut is None or cand.index("<|") < cut):
                cut, stopped = cand.index("<|"), "marker"
            if stop_text and stop_text in cand and (cut is None or cand.index(stop_text) < cut):
                cut, stopped = cand.index(stop_text), "suffix"
            probs.append(float(p[t]))
            if cut is not None:
                text = cand[:cut]
                break
            text = cand
            logits = self._logits([t], cache)
        t_all = time.perf_counter() - t0
        return {
            "raw": text,
            "p_mean": sum(probs) / len(probs) if probs else 0.0,
            "p_min": min(probs) if probs else 0.0,
            "tokens": len(probs),
            "stopped": stopped,
            "healed": pending,
            "encode_s": round(t_enc, 4),
            "decode_s": round(t_all - t_enc, 4),
            "prompt_tokens": len(ids),
        }


def server_text(out: str, ctx: Any, plan: Any) -> str:
    """completion_eval.run_model's rule: the text compared is the suggestion less the replaced closers."""
    replace = ctx.line_suffix[: plan.replace_suffix_chars]
    if out == replace:
        out = ""
    if replace and out:
        return out[: len(out) - len(replace)] if out.endswith(replace) else "\x00" + out
    return out


def scored(raw: str, ctx: Any, plan: Any, case: dict[str, Any]) -> dict[str, Any]:
    from dgemma_lsp.lsp.postprocess import clean_completion

    out = clean_completion(raw, ctx, plan)
    return score(server_text(out, ctx, plan), case) | {"text": out}


def first_step_confidence(backend: Any, full_ids: list[int], draft_ids: list[int], canvas: int, seed: int) -> float:
    """Geometric mean probability of ``draft_ids`` at canvas positions 0.. under one decoder forward from pure uniform
    noise (no self-conditioning): the canvas's first step, the backend's confidence measure (before the temperature
    schedule), here scoring the draft."""
    import torch

    model = backend.model
    vocab = model.config.text_config.vocab_size
    g = torch.Generator().manual_seed(seed)
    noise = torch.randint(0, vocab, (1, canvas), generator=g)
    out = model(input_ids=torch.tensor([full_ids]), decoder_input_ids=noise)
    lp = out.logits[0].float().log_softmax(-1)
    n = min(len(draft_ids), canvas)
    return math.exp(sum(float(lp[i, draft_ids[i]]) for i in range(n)) / n) if n else 0.0


def run_seeded(backend: Any, ctx: Any, plan: Any, raw: str, steps: int, seed: int) -> tuple[str, Any]:
    from dgemma_lsp.backend.contract import Done
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.infill import make_request
    from dgemma_lsp.lsp.postprocess import clean_completion

    req = make_request(ctx, plan, Settings(min_confidence=0.0), seed=seed, want_drafts=False, backend=backend)
    req = dataclasses.replace(req, seed_text=raw + ("\n" if plan.mode == "single" else ""), max_denoising_steps=steps)

    async def go() -> Any:
        done = None
        async for ev in backend.generate(req):
            if isinstance(ev, Done):
                done = ev
        return done

    done = asyncio.run(go())
    return clean_completion(done.text if done else "", ctx, plan), done


def gate_curve(rows: list[dict[str, Any]], who: str, conf: str) -> list[tuple[float, int, int]]:
    out = []
    for t in THRESHOLDS:
        shown = [r for r in rows if not r[who]["empty"] and (r[who].get(conf) or 0.0) >= t]
        out.append((t, len(shown), sum(r[who]["exact"] for r in shown)))
    return out


def counts(rows: list[dict[str, Any]], who: str) -> dict[str, Any]:
    blocks = [r for r in rows if r["kind"] == "block"]
    lines = [r for r in rows if r["kind"] != "block"]
    return {
        "n": len(rows),
        "exact": sum(r[who]["exact"] for r in rows),
        "prefix": sum(r[who]["prefix"] for r in rows),
        "exact_lines": sum(r[who]["exact"] for r in lines),
        "n_lines": len(lines),
        "first_line_blocks": sum(r[who]["first_line"] for r in blocks),
        "n_blocks": len(blocks),
        "empty": sum(r[who]["empty"] for r in rows),
        "python": sum(r[who]["exact"] for r in rows if r["language_id"] == "python"),
        "typescript": sum(r[who]["exact"] for r in rows if r["language_id"] == "typescript"),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "backend" / "models" / "small"), help="checkpoint folder")
    ap.add_argument("--cases", default=str(DEFAULT_CASES))
    ap.add_argument("--split", default="dev", choices=["dev"], help="dev only: the test split is kept for scoring")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--no-canvas", action="store_true", help="skip the canvas baseline")
    ap.add_argument("--seeded", default="", help="comma-separated denoising steps for canvases seeded by the draft")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    a = ap.parse_args(argv)

    import torch

    torch.set_grad_enabled(False)
    _, cases = load_cases(a.cases, a.split)
    cases = pick(cases, a.limit)
    backend = load_backend(a.model, a.threads)
    torch.set_num_threads(a.threads)
    backend.threads.pick = lambda: a.threads  # the canvas too: the governor would take every idle core
    import dgemma_lsp.lsp.infill as infill_mod

    print(
        f"model {a.model}; lsp from {infill_mod.__file__}; dtype {next(backend.model.parameters()).dtype}; "
        f"{len(cases)} {a.split} cases; threads {a.threads}",
        file=sys.stderr,
    )
    drafter = Drafter(backend, a.max_tokens)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for i, c in enumerate(cases):
        ctx, plan, messages = context_for(backend, c)
        ids, tail, full = prefix_ids(backend, messages)
        rest = ctx.line_suffix[plan.replace_suffix_chars :].strip() if plan.mode == "single" else ""
        row = {k: c[k] for k in ("id", "language_id", "kind", "target")} | {"plan": plan.mode}
        for name, heal in (("heal", True), ("plain", False)):
            d = drafter.draft(ids, tail, heal=heal, stop_text=rest)
            row[name] = d | scored(d["raw"], ctx, plan, c)
        rows.append(row)
        h = row["heal"]
        print(
            f"{i + 1}/{len(cases)} {c['kind']:5s} heal exact={int(h['exact'])} plain exact={int(row['plain']['exact'])}"
            f" p={h['p_mean']:.2f} {h['stopped']:7s} {h['encode_s'] + h['decode_s']:.2f}s "
            f"want={c['target'][:40]!r} got={h['text'][:40]!r}",
            file=sys.stderr,
            flush=True,
        )
    draft_s = time.perf_counter() - t0

    canvas_s = None
    if not a.no_canvas:
        t1 = time.perf_counter()
        rep = evaluate(cases, backend, gate_off=True, log=sys.stderr)
        canvas_s = time.perf_counter() - t1
        for row, r in zip(rows, rep["rows"], strict=True):
            row["canvas"] = r["model"]
            row["copy_above"] = r["copy_above"]

    seeded_steps = [int(s) for s in a.seeded.split(",") if s.strip()]
    for k in seeded_steps:
        for i, (row, c) in enumerate(zip(rows, cases, strict=True)):
            ctx, plan, messages = context_for(backend, c)
            raw = row["heal"]["raw"]
            if not raw.strip():
                row[f"seeded{k}"] = score("", c) | {"text": "", "confidence": None, "kept": None}
                continue
            out, done = run_seeded(backend, ctx, plan, raw, k, a.seed)
            conf = done.stats.extra.get("confidence") if done else None
            row[f"seeded{k}"] = score(server_text(out, ctx, plan), c) | {
                "text": out,
                "confidence": conf,
                "kept": out == row["heal"]["text"],
            }
            print(
                f"seeded{k} {i + 1}/{len(cases)} kept={int(out == row['heal']['text'])} "
                f"exact={int(row[f'seeded{k}']['exact'])} draft_exact={int(row['heal']['exact'])} "
                f"got={out[:40]!r}",
                file=sys.stderr,
                flush=True,
            )
    if seeded_steps:
        from dgemma_lsp.backend.chat_tokens import text_ids

        for row, c in zip(rows, cases, strict=True):
            ctx, plan, messages = context_for(backend, c)
            _, _, full = prefix_ids(backend, messages)
            raw = row["heal"]["raw"]
            dids = text_ids(backend.tokenizer, raw + ("\n" if plan.mode == "single" else "")) if raw.strip() else []
            row["heal"]["canvas_conf"] = first_step_confidence(backend, full, dids, plan.canvas_length, a.seed)

    # ---- report
    who = (
        ["heal", "plain"] + (["canvas", "copy_above"] if not a.no_canvas else []) + [f"seeded{k}" for k in seeded_steps]
    )
    print("\n| who | n | exact | exact (line+mid) | right prefix | first line (blocks) | empty | exact py / ts |")
    print("|---|---|---|---|---|---|---|---|")
    for w in who:
        t = counts(rows, w)
        print(
            f"| {w} | {t['n']} | {t['exact']} | {t['exact_lines']} of {t['n_lines']} | {t['prefix']} | "
            f"{t['first_line_blocks']} of {t['n_blocks']} | {t['empty']} | {t['python']} / {t['typescript']} |"
        )
    print("\nGate curve (shown / exact among shown):")
    curves = {"heal": ("heal", "p_mean"), "plain": ("plain", "p_mean")}
    if not a.no_canvas:
        curves["canvas (first-step confidence)"] = ("canvas", "confidence")
    if seeded_steps:
        curves["heal draft, scored by the canvas's unseeded first step"] = ("heal", "canvas_conf")
        for k in seeded_steps:
            curves[f"seeded{k} (its own first-step confidence)"] = (f"seeded{k}", "confidence")
    print("| who | " + " | ".join(f">= {t}" for t in THRESHOLDS) + " |")
    print("|---|" + "---|" * len(THRESHOLDS))
    for label, (w, conf) in curves.items():
        print(f"| {label} | " + " | ".join(f"{s} / {e}" for _, s, e in gate_curve(rows, w, conf)) + " |")
    print()
    for w in ("heal", "plain"):
        enc = [r[w]["encode_s"] * 1000 for r in rows]
        dec = [r[w]["decode_s"] * 1000 for r in rows]
        tot = [x + y for x, y in zip(enc, dec, strict=True)]
        toks = [r[w]["tokens"] for r in rows]
        q = statistics.quantiles
        print(
            f"{w}: latency ms p50 / p90: encode {statistics.median(enc):.0f} / {q(enc, n=10)[-1]:.0f}, greedy steps "
            f"{statistics.median(dec):.0f} / {q(dec, n=10)[-1]:.0f}, total {statistics.median(tot):.0f} / "
            f"{q(tot, n=10)[-1]:.0f}; tokens p50 {statistics.median(toks):.0f}; prompt tokens p50 "
            f"{statistics.median(r[w]['prompt_tokens'] for r in rows):.0f}; stops "
            + ", ".join(
                f"{s} {sum(r[w]['stopped'] == s for r in rows)}" for s in ("newline", "suffix", "marker", "eos", "max")
            )
        )
    if not a.no_canvas:
        secs = [r["canvas"]["seconds"] * 1000 for r in rows]
        print(
            f"canvas: latency ms p50 / p90 {statistics.median(secs):.0f} / {statistics.quantiles(secs, n=10)[-1]:.0f}"
            f" (the server's pipeline, 16 steps)"
        )
        both = sum(r["heal"]["exact"] and r["canvas"]["exact"] for r in rows)
        print(f"exact by both heal draft and canvas: {both}")
    if seeded_steps:
        for k in seeded_steps:
            kept = sum(bool(r[f"seeded{k}"].get("kept")) for r in rows)
            lost = sum(r["heal"]["exact"] and not r[f"seeded{k}"]["exact"] for r in rows)
            gain = sum(r[f"seeded{k}"]["exact"] and not r["heal"]["exact"] for r in rows)
            print(
                f"seeded{k}: kept the draft verbatim {kept} of {len(rows)}; exact drafts lost {lost}, new exact {gain}"
            )
        for label, sel in (("exact drafts", True), ("wrong drafts", False)):
            v = [r["heal"]["canvas_conf"] for r in rows if r["heal"]["exact"] == sel and not r["heal"]["empty"]]
            if v:
                print(
                    f"unseeded first-step confidence of the heal draft, {label}: median {statistics.median(v):.3f}, "
                    f"max {max(v):.3f} (n {len(v)})"
                )
    print(f"drafts {draft_s:.0f} s" + (f", canvas {canvas_s:.0f} s" if canvas_s else ""))
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "rows": rows}, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
