"""The FA3 path of the plugin's ``attention`` piece (backend/vllm_attention.py) on CPU.

Under test is how :func:`fa3_canvas_attention` serves vLLM's per-request causal flags with FA3's one flag per call:
the window it gives each pass and the rows each pass covers (``seqused_q``). Below it, FA3 itself is a fake
(``fake_fa3_pass``: PyTorch attention over the paged cache with FlashAttention's documented masking, bottom-right
aligned, writing only the first ``seqused_q`` rows of a request). The reference is vLLM's TRITON_ATTN masking
(``kernel_unified_attention``: causal = keys up to the query's position; bidirectional = every key of the sequence;
sliding window on both sides for bidirectional requests). The real FA3 ran against vLLM's kernel on the H200
(bench/RESULTS.md).
"""

from __future__ import annotations

import pytest
import torch

from dgemma_lsp.backend import vllm_attention

HEADS, KV_HEADS, HEAD, BLOCK = 4, 2, 8, 4


def fake_fa3_pass(q, k, v, out, cu_seqlens_q, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, block_table,
                  softmax_scale, causal, window, softcap, num_splits, plan=None) -> None:  # fmt: skip
    """FlashAttention's forward semantics in PyTorch (a fake of FA3, below the layer under test)."""
    for i in range(len(seqused_k)):
        q0, q1 = int(cu_seqlens_q[i]), int(cu_seqlens_q[i + 1])
        rows = q1 - q0 if seqused_q is None else int(seqused_q[i])
        if rows == 0:
            continue
        nk = int(seqused_k[i])
        blocks = block_table[i, : -(-nk // BLOCK)]
        keys = k[blocks].reshape(-1, KV_HEADS, HEAD)[:nk]
        vals = v[blocks].reshape(-1, KV_HEADS, HEAD)[:nk]
        qi = q[q0 : q0 + rows]
        rep = HEADS // KV_HEADS
        s = torch.einsum("qhd,khd->hqk", qi.float(), keys.repeat_interleave(rep, 1).float()) * softmax_scale
        qpos = torch.arange(rows)[:, None] + nk - rows  # bottom-right aligned (FA's convention)
        kpos = torch.arange(nk)[None, :]
        left, right = window
        if causal:
            right = 0
        ok = torch.ones(rows, nk, dtype=torch.bool)
        if left >= 0:
            ok &= kpos >= qpos - left
        if right >= 0:
            ok &= kpos <= qpos + right
        s = s.masked_fill(~ok, float("-inf"))
        p = torch.softmax(s, -1)
        out[q0 : q0 + rows] = torch.einsum("hqk,khd->qhd", p, vals.repeat_interleave(rep, 1).float()).to(out.dtype)


def vllm_reference(q, k, v, cu, seq_lens, block_table, scale, causal, window_left) -> torch.Tensor:
    """vLLM 0.26's TRITON_ATTN masking with per-request causal flags (triton_attention_helpers.compute_kv_seq_mask)."""
    out = torch.zeros_like(q, dtype=torch.float32)
    sw = window_left + 1 if window_left >= 0 else 0
    for i in range(len(seq_lens)):
        q0, q1, nk = int(cu[i]), int(cu[i + 1]), int(seq_lens[i])
        blocks = block_table[i, : -(-nk // BLOCK)]
        keys = k[blocks].reshape(-1, KV_HEADS, HEAD)[:nk].repeat_interleave(HEADS // KV_HEADS, 1).float()
        vals = v[blocks].reshape(-1, KV_HEADS, HEAD)[:nk].repeat_interleave(HEADS // KV_HEADS, 1).float()
        qabs = torch.arange(q1 - q0)[:, None] + nk - (q1 - q0)
        kpos = torch.arange(nk)[None, :]
        ok = (kpos <= qabs) if bool(causal[i]) else (kpos < nk).expand(q1 - q0, nk).clone()
        if sw:
            ok &= (qabs - kpos) < sw
            if not bool(causal[i]):
                ok &= (kpos - qabs) < sw
        s = torch.einsum("qhd,khd->hqk", q[q0:q1].float(), keys) * scale
        p = torch.softmax(s.masked_fill(~ok, float("-inf")), -1)
        out[q0:q1] = torch.einsum("hqk,khd->qhd", p, vals)
    return out


@pytest.mark.parametrize("window_left", [-1, 5])
def test_each_request_gets_its_own_causal_flag(monkeypatch: pytest.MonkeyPatch, window_left: int) -> None:
    """A commit (causal) beside two canvases (bidirectional), with a sliding window narrower than the context:
    every row matches vLLM's masking, and rows of padded (empty) requests are left alone."""
    monkeypatch.setattr(vllm_attention, "_fa3_pass", fake_fa3_pass)
    torch.manual_seed(0)
    canvas, ctx = [6, 6, 6, 0], [9, 3, 14, 0]  # the last request is graph padding: no rows, no keys
    seq_lens = torch.tensor([c + x for c, x in zip(canvas, ctx, strict=True)], dtype=torch.int32)
    cu = torch.tensor([0, *torch.tensor(canvas).cumsum(0).tolist()], dtype=torch.int32)
    per = -(-int(seq_lens.max()) // BLOCK)
    k = torch.randn(len(canvas) * per, BLOCK, KV_HEADS, HEAD)
    v = torch.randn_like(k)
    block_table = torch.randperm(len(canvas) * per).view(len(canvas), per).to(torch.int32)  # scattered blocks
    q = torch.randn(int(cu[-1]) + 2, HEADS, HEAD)  # two padding rows past the last request
    causal = torch.tensor([True, False, False, False])
    out = torch.full_like(q, 7.0)
    vllm_attention.fa3_canvas_attention(
        q=q, k=k, v=v, out=out, cu_seqlens_q=cu, max_seqlen_q=6, seqused_k=seq_lens, max_seqlen_k=64,
        softmax_scale=HEAD**-0.5, causal=causal, window_size=(window_left, 0), block_table=block_table, softcap=0.0,
    )  # fmt: skip
    ref = vllm_reference(q, k, v, cu, seq_lens, block_table, HEAD**-0.5, causal, window_left)
    n = int(cu[-1])
    torch.testing.assert_close(out[:n], ref[:n], atol=1e-5, rtol=1e-5)
    assert bool((out[n:] == 7.0).all())
    # the flags matter: the commit's rows differ from what a bidirectional pass gives them
    both = vllm_reference(q, k, v, cu, seq_lens, block_table, HEAD**-0.5, torch.zeros(4, dtype=torch.bool), window_left)
    assert not torch.allclose(both[:6], ref[:6], atol=1e-3)


def test_one_flag_for_the_call_is_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain bool (prefill through this path) runs a single FA3 pass over every row."""
    calls: list[tuple[bool, object]] = []

    def record(*args) -> None:
        calls.append((args[11], args[5]))

    monkeypatch.setattr(vllm_attention, "_fa3_pass", record)
    q = torch.zeros(4, HEADS, HEAD)
    vllm_attention.fa3_canvas_attention(
        q=q, k=q, v=q, out=q, cu_seqlens_q=torch.tensor([0, 4], dtype=torch.int32), max_seqlen_q=4,
        seqused_k=torch.tensor([4], dtype=torch.int32), max_seqlen_k=4, softmax_scale=1.0, causal=True,
        window_size=(-1, -1), block_table=torch.zeros(1, 1, dtype=torch.int32), softcap=0.0,
    )  # fmt: skip
    assert calls == [(True, None)]


def test_fa3_is_not_called_with_an_op_it_does_not_fit() -> None:
    """The positional call is vLLM 0.26's; an FA3 op whose arguments moved leaves the tiles in charge."""
    names = ["q", "k", "v", "k_new", "v_new", "q_v", "out", "cu_seqlens_q", "cu_seqlens_k", "cu_seqlens_k_new",
             "seqused_q", "seqused_k"] + [f"a{i}" for i in range(25)]  # fmt: skip
    assert vllm_attention.fa3_signature_ok(names)
    assert not vllm_attention.fa3_signature_ok(names[:30])
    assert not vllm_attention.fa3_signature_ok(names[:9] + ["extra"] + names[9:])


def test_each_pass_gets_the_plan_made_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """FA3's per-step plans (``fa3_plans``) and the passes that use them: the bidirectional pass gets the plan made
    without causality over the bidirectional rows, the causal pass the other one (a swap would schedule one pass's
    tiles over the other's rows); a bool flag makes one plan for its single pass."""
    made: list[tuple] = []

    def fake_plan(**kw):  # a fake of FA3's get_scheduler_metadata, below the layer under test
        made.append((kw["causal"], kw["seqused_q"]))
        return f"plan-{len(made)}"

    passes: list[tuple] = []

    def record(*args) -> None:
        passes.append((args[11], args[5], args[15]))  # causal, seqused_q, plan

    monkeypatch.setattr(vllm_attention, "fa3_plan", fake_plan)
    monkeypatch.setattr(vllm_attention, "_fa3_pass", record)
    q = torch.zeros(12, HEADS, HEAD)
    cu = torch.tensor([0, 6, 12], dtype=torch.int32)
    flags = torch.tensor([True, False])
    rows = vllm_attention.fa3_rows(cu, flags)
    common = dict(q=q, k=q, cu_seqlens_q=cu, seqused_k=torch.tensor([9, 9], dtype=torch.int32),
                  block_table=torch.zeros(2, 1, dtype=torch.int32), window_size=(-1, -1), softcap=0.0)  # fmt: skip
    plans = vllm_attention.fa3_plans(causal=flags, rows=rows, max_seqlen_q=6, num_splits=1, **common)
    assert made == [(False, rows[0]), (True, rows[1])] and plans == ("plan-1", "plan-2")
    vllm_attention.fa3_canvas_attention(v=q, out=q, max_seqlen_q=6, max_seqlen_k=9, softmax_scale=1.0, causal=flags,
                                        rows=rows, plans=plans, **common)  # fmt: skip
    assert passes == [(False, rows[0], "plan-1"), (True, rows[1], "plan-2")]
    made.clear()
    passes.clear()
    one = vllm_attention.fa3_plans(causal=True, rows=None, max_seqlen_q=6, num_splits=1, **common)
    vllm_attention.fa3_canvas_attention(v=q, out=q, max_seqlen_q=6, max_seqlen_k=9, softmax_scale=1.0, causal=True,
                                        plans=one, **common)  # fmt: skip
    assert made == [(True, None)] and passes == [(True, None, "plan-1")]
