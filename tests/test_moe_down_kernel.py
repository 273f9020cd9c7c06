"""The experts' second GEMM with the top-k sum in its epilogue (backend/kernels/moe_down.py), under Triton's
interpreter on CPU: the MoE output vLLM's second GEMM followed by ``moe_sum`` gives (each (token, expert) row times
its routed weight rounded to bf16, the token's rows added in float32, rounded to bf16 once).

Inputs are small integers in fp8 with power-of-two scales, so every GEMM sum is exact in float32 in any order and the
comparison can be bit for bit. The alignment tensors are those of tests/test_moe_gated_kernel.py (vLLM's layout)."""

from __future__ import annotations

from interpreter_mode import enter_interpreter_mode, rerun_if_late

# before triton is imported (see tests/interpreter_mode.py)
_LATE = enter_interpreter_mode()

import pytest  # noqa: E402
import torch  # noqa: E402
from test_moe_gated_kernel import _align  # noqa: E402

from dgemma_lsp.backend.kernels.moe_down import down_sum_gemm  # noqa: E402


def _case(tokens: int, experts: int, n: int, k: int, top_k: int, seed: int):
    """``a`` (tokens x top_k, n) fp8 and its row scales, ``w`` (experts, k, n) fp8 and its channel scales, the
    routed weights (softmax-like, float32) and expert ids."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-3, 4, (tokens * top_k, n), generator=g).float().to(torch.float8_e4m3fn)
    w = torch.randint(-3, 4, (experts, k, n), generator=g).float().to(torch.float8_e4m3fn)
    a_scale = 2.0 ** -torch.randint(1, 5, (tokens * top_k, 1), generator=g).float()
    w_scale = 2.0 ** -torch.randint(1, 5, (experts, k, 1), generator=g).float()
    weights = torch.rand(tokens, top_k, generator=g).softmax(-1)
    topk_ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)])
    return a, a_scale, w, w_scale, weights, topk_ids


def _gemm_then_moe_sum(a, a_scale, w, w_scale, weights, topk_ids) -> torch.Tensor:
    """vLLM's second GEMM row by row (times the routed weight, rounded to bf16), then moe_sum (float32 in slot
    order, rounded to bf16)."""
    tokens, top_k = weights.shape
    out = []
    for t in range(tokens):
        acc = torch.zeros(w.shape[1])
        for s in range(top_k):
            r, e = t * top_k + s, int(topk_ids[t, s])
            row = a[r].float() @ w[e].float().T  # exact: small integers
            acc += (row * a_scale[r] * w_scale[e, :, 0] * weights[t, s]).to(torch.bfloat16).float()
        out.append(acc.to(torch.bfloat16))
    return torch.stack(out)


def _run(case, config, tiles=None, spare_blocks: int = 2) -> torch.Tensor:
    a, a_scale, w, w_scale, weights, topk_ids = case
    ids, blocks, post = _align(topk_ids, config["BLOCK_SIZE_M"], w.shape[0], spare_blocks)
    out = torch.zeros(weights.shape[0], w.shape[1])
    down_sum_gemm(a, a_scale, w, w_scale, weights, out, ids, blocks, post, config, tiles)
    return out


@pytest.mark.parametrize(
    "tokens,n,k,config",
    [
        # K (output columns) not a multiple of BLOCK_SIZE_N, N (the sum) not one of BLOCK_SIZE_K, grouped order
        (7, 80, 24, {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 2}),
        (12, 64, 48, {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}),
    ],
)
def test_same_output_as_vllms_second_gemm_then_moe_sum(tokens, n, k, config) -> None:
    case = _case(tokens, 5, n, k, 3, seed=tokens)
    out = _run(case, config)
    ref = _gemm_then_moe_sum(*case)
    assert torch.equal(out.to(torch.bfloat16), ref)
    # every token got its top-k rows (a token whose rows were dropped would be far off, most likely zero)
    assert torch.all(out.abs().amax(dim=-1) > 0)


@pytest.mark.parametrize("tiles", [(16, 16, 1, 4, 2), (64, 32, 3, 8, 4)])
def test_a_tuned_tile_gives_the_same_numbers(tiles) -> None:
    """DGEMMA_MOE_DOWN_TILES' tiles (block_n, block_k, group_m, warps, stages) replace vLLM's config's."""
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 1}
    case = _case(9, 5, 80, 24, 2, seed=11)
    assert torch.equal(_run(case, config, tiles), _run(case, config))


def test_the_routed_weight_and_the_buffer_count() -> None:
    """The test above can fail: the routed weights scale each row, and the sums add to what ``out`` holds."""
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 1}
    a, a_scale, w, w_scale, weights, topk_ids = _case(6, 4, 32, 16, 2, seed=3)
    out = _run((a, a_scale, w, w_scale, weights, topk_ids), config)
    flipped = _run((a, a_scale, w, w_scale, weights.flip(-1).contiguous(), topk_ids), config)
    assert not torch.equal(out, flipped)
    ids, blocks, post = _align(topk_ids, 16, 4)
    twice = out.clone()
    down_sum_gemm(a, a_scale, w, w_scale, weights, twice, ids, blocks, post, config)
    torch.testing.assert_close(twice, 2 * out)


def test_bad_arguments_are_refused() -> None:
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 32}
    a, a_scale, w, w_scale, weights, topk_ids = _case(4, 3, 32, 16, 2, seed=1)
    ids, blocks, post = _align(topk_ids, 16, 3)
    with pytest.raises(ValueError, match="float32"):
        down_sum_gemm(a, a_scale, w, w_scale, weights, torch.zeros(4, 16, dtype=torch.bfloat16), ids, blocks, post,
                      config)  # fmt: skip
    with pytest.raises(ValueError, match="a must be"):
        down_sum_gemm(a[:4], a_scale, w, w_scale, weights, torch.zeros(4, 16), ids, blocks, post, config)
    with pytest.raises(ValueError, match="contiguous"):
        down_sum_gemm(a, a_scale, w, w_scale, weights.t().contiguous().t(), torch.zeros(4, 16), ids, blocks, post,
                      config)  # fmt: skip


rerun_if_late(globals(), __file__, _LATE)
