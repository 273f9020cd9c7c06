"""The experts' first GEMM with the gated activation in its epilogue (backend/kernels/moe_gated.py), under Triton's
interpreter on CPU: the same numbers the quantizer sees as vLLM's GEMM output followed by ``act_quant``'s gated path.

Inputs are small integers in fp8 with power-of-two scales, so every GEMM sum is exact in float32 in any order and
the comparison can be bit for bit. The alignment tensors are built here the way vLLM's ``moe_align_block_size``
lays them out (each expert's rows padded to the block with an out-of-range id)."""

from __future__ import annotations

from tests.support.interpreter_mode import enter_interpreter_mode, rerun_if_late

# before triton is imported (see tests/support/interpreter_mode.py)
_LATE = enter_interpreter_mode()

import pytest  # noqa: E402
import torch  # noqa: E402

from dgemma_lsp.backend.kernels.act_quant import act_quant  # noqa: E402
from dgemma_lsp.backend.kernels.moe_gated import gated_gemm  # noqa: E402


def _align(topk_ids: torch.Tensor, block_m: int, experts: int, spare_blocks: int = 2):
    flat = topk_ids.reshape(-1)
    sentinel = flat.numel()
    ids: list[int] = []
    blocks: list[int] = []
    for e in range(experts):
        rows = (flat == e).nonzero().flatten().tolist()
        if not rows:
            continue
        pad = -len(rows) % block_m
        ids += rows + [sentinel] * pad
        blocks += [e] * ((len(rows) + pad) // block_m)
    post_padded = len(ids)
    # vLLM's buffers are larger than what is used: programs past num_tokens_post_padded must not touch them
    ids += [sentinel] * (spare_blocks * block_m)
    blocks += [-1] * spare_blocks
    return (torch.tensor(ids, dtype=torch.int32), torch.tensor(blocks, dtype=torch.int32),
            torch.tensor([post_padded], dtype=torch.int32))  # fmt: skip


def _case(tokens: int, experts: int, n: int, k: int, top_k: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-3, 4, (tokens, k), generator=g).float().to(torch.float8_e4m3fn)
    w = torch.randint(-3, 4, (experts, 2 * n, k), generator=g).float().to(torch.float8_e4m3fn)
    a_scale = 2.0 ** -torch.randint(1, 5, (tokens, 1), generator=g).float()
    w_scale = 2.0 ** -torch.randint(1, 5, (experts, 2 * n, 1), generator=g).float()
    topk_ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)])
    return a, a_scale, w, w_scale, topk_ids


def _gemm_then_gate(a, a_scale, w, w_scale, topk_ids):
    """vLLM's first GEMM, row by row: [gate | up] in bf16 for each (token, expert) pair."""
    top_k = topk_ids.shape[1]
    rows = []
    for r, e in enumerate(topk_ids.reshape(-1).tolist()):
        acc = a[r // top_k].float() @ w[e].float().T  # exact: small integers
        rows.append((acc * a_scale[r // top_k] * w_scale[e, :, 0]).to(torch.bfloat16))
    return torch.stack(rows)


@pytest.mark.parametrize("activation", ["gelu_tanh", "silu"])
@pytest.mark.parametrize(
    "tokens,n,k,config",
    [
        # N not a multiple of the half block, K not a multiple of BLOCK_SIZE_K, grouped program order
        (7, 24, 80, {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 2}),
        (12, 32, 64, {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}),
    ],
)
def test_same_quantizer_input_as_vllms_gemm_then_act_quant(activation, tokens, n, k, config) -> None:
    experts, top_k = 5, 2
    a, a_scale, w, w_scale, topk_ids = _case(tokens, experts, n, k, top_k, seed=tokens)
    ids, blocks, post = _align(topk_ids, config["BLOCK_SIZE_M"], experts)
    out = torch.full((tokens * top_k, n), float("nan"), dtype=torch.bfloat16)
    gated_gemm(a, a_scale, w, w_scale, out, ids, blocks, post, top_k, activation, config)
    assert not out.isnan().any(), "a (token, expert) row was not written"

    gate_up = _gemm_then_gate(a, a_scale, w, w_scale, topk_ids)
    # what the shipped path quantizes (act_quant's gated kernel on vLLM's GEMM output) against the same quantizer
    # on this kernel's output: equal bit for bit (float32 outputs: the interpreter's fp8 conversion truncates)
    q_ref, s_ref = act_quant(gate_up, activation, out=torch.empty(tokens * top_k, n), impl="triton")
    q, s = act_quant(out, None, out=torch.empty(tokens * top_k, n), impl="triton")
    torch.testing.assert_close(s, s_ref, rtol=0, atol=0)
    torch.testing.assert_close(q, q_ref, rtol=0, atol=0)
    # and close to PyTorch's own activation of the same bf16 [gate | up]
    act = torch.nn.functional.gelu if activation == "gelu_tanh" else torch.nn.functional.silu
    kw = {"approximate": "tanh"} if activation == "gelu_tanh" else {}
    ref = (act(gate_up[:, :n].float(), **kw).to(torch.bfloat16).float() * gate_up[:, n:].float()).to(torch.bfloat16)
    torch.testing.assert_close(out.float(), ref.float(), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("tiles", [(16, 16, 1, 4, 2), (32, 64, 3, 8, 4)])
def test_a_tuned_tile_gives_the_same_numbers(tiles) -> None:
    """The kernel's ``tiles`` (block_n per accumulator, block_k, group_m, warps, stages) in place of vLLM's halved
    config give the same numbers: K = 80 leaves a remainder for block_k 16 and 64, N = 24 one for block_n 16 and 32."""
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 1}
    a, a_scale, w, w_scale, topk_ids = _case(9, 5, 24, 80, 2, seed=11)
    ids, blocks, post = _align(topk_ids, 16, 5)
    ref = torch.full((18, 24), float("nan"), dtype=torch.bfloat16)
    gated_gemm(a, a_scale, w, w_scale, ref, ids, blocks, post, 2, "gelu_tanh", config)
    out = torch.full_like(ref, float("nan"))
    gated_gemm(a, a_scale, w, w_scale, out, ids, blocks, post, 2, "gelu_tanh", config, tiles)
    assert not out.isnan().any() and torch.equal(out, ref)


def test_a_wrong_expert_or_scale_shows() -> None:
    """The test above can fail: the up half's scale or another expert's weights change the output."""
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 1}
    a, a_scale, w, w_scale, topk_ids = _case(6, 4, 16, 32, 2, seed=3)
    ids, blocks, post = _align(topk_ids, 16, 4)
    out = torch.empty((12, 16), dtype=torch.bfloat16)
    gated_gemm(a, a_scale, w, w_scale, out, ids, blocks, post, 2, "silu", config)
    w_scale2 = w_scale.clone()
    w_scale2[:, 16:] *= 2.0
    out2 = torch.empty_like(out)
    gated_gemm(a, a_scale, w, w_scale2, out2, ids, blocks, post, 2, "silu", config)
    assert not torch.equal(out, out2)


def test_bad_arguments_are_refused() -> None:
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32}
    a, a_scale, w, w_scale, topk_ids = _case(4, 3, 16, 32, 2, seed=1)
    ids, blocks, post = _align(topk_ids, 16, 3)
    with pytest.raises(ValueError, match="gated activation"):
        gated_gemm(a, a_scale, w, w_scale, torch.empty(8, 16, dtype=torch.bfloat16), ids, blocks, post, 2, None, config)
    with pytest.raises(ValueError, match="bf16"):
        gated_gemm(a, a_scale, w, w_scale, torch.empty(8, 16), ids, blocks, post, 2, "silu", config)


rerun_if_late(globals(), __file__, _LATE)
