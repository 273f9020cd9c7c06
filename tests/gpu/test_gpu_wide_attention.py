"""The head-512 canvas attention kernel on the GPU at the 26B-A4B's full-layer shape (16 query heads, 2 KV heads,
head 512, canvases of 256 over a 1k context in a paged bf16 cache), against the PyTorch reference."""

from __future__ import annotations

import pytest
import torch

from dgemma_lsp.backend.vllm_attention import attention_tuning

H200 = attention_tuning("NVIDIA H200")
assert H200 is not None, "the shipped H200 tiles file"

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: run tests/gpu/run_device.sh"),
]


def _case(batch: int, block_size: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    dev, bf, head, qh, kvh, canvas = "cuda", torch.bfloat16, 512, 16, 2, 256
    ctx = [1024 + 37 * i for i in range(batch)]  # contexts not on a block boundary
    qlen = [canvas] * batch
    per = [-(-(c + q) // block_size) for c, q in zip(ctx, qlen, strict=True)]
    nblocks = sum(per) + 3
    kv = torch.randn(nblocks, kvh, block_size, 2 * head, generator=g).to(dev, bf)  # vLLM's layout
    k, v = kv.transpose(1, 2).split(head, dim=-1)
    perm = torch.randperm(nblocks, generator=g)  # scattered blocks, as a long-running cache has them
    table = torch.zeros(batch, max(per), dtype=torch.int32)
    used = 0
    for i, n in enumerate(per):
        table[i, :n] = perm[used : used + n]
        used += n
    q = torch.randn(sum(qlen), qh, head, generator=g).to(dev, bf)
    cu = torch.tensor([0, *torch.tensor(qlen).cumsum(0).tolist()], dtype=torch.int32, device=dev)
    seqk = torch.tensor([c + q for c, q in zip(ctx, qlen, strict=True)], dtype=torch.int32, device=dev)
    return dict(q=q, k=k, v=v, cu_seqlens_q=cu, seqused_k=seqk, softmax_scale=head**-0.5, block_table=table.to(dev))


@pytest.mark.parametrize("batch,block_size", [(1, 16), (4, 64)])
@pytest.mark.parametrize(
    "cfg",
    # the defaults the engine launches (per call size), then other shapes of the kernel
    [*(t for _, t in H200.wide), (64, 32, 2, 8, 2, 1), (128, 32, 4, 8, 2, 1), (128, 64, 2, 8, 1, 0)],
)
def test_wide_kernel_matches_reference_on_gpu(batch: int, block_size: int, cfg: tuple) -> None:
    from dgemma_lsp.backend.kernels.wide_attention import wide_attention, wide_attention_reference

    args = _case(batch, block_size, seed=batch * 100 + block_size)
    block_m, block_n, d_split, warps, stages, kv_splits = cfg  # kv_splits 0: enough to fill the SMs
    # a commit step (causal) beside denoising canvases (bidirectional), as the engine batches them
    for causal in (False, True, torch.arange(batch, device="cuda") % 2 == 0):
        out = torch.full_like(args["q"], float("nan"))
        wide_attention(out=out, causal=causal, block_m=block_m, block_n=block_n, d_split=d_split,
                       num_warps=warps, num_stages=stages, kv_splits=kv_splits or None, **args)  # fmt: skip
        ref = wide_attention_reference(out=torch.zeros_like(out), causal=causal, **args)
        torch.testing.assert_close(out.float(), ref.float(), atol=2e-2, rtol=2e-2)
