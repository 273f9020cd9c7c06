"""The plugin's ``attention`` piece on the staged vLLM (0.33 or 0.34 kit) on the H200: it is active there, and its
implementation's canvas attention matches vLLM's own ``TRITON_ATTN`` implementation on the same paged cache.

Both implementations are the real classes (ours subclasses vLLM's ``TritonAttentionImpl``) built with the same
arguments and called with the same real ``TritonAttentionMetadata``; the attention layer, whose only part ``forward``
reads is its q / k / v scales, is a stand-in (``ScalesOnlyLayer``). Shapes: DiffusionGemma 26B-A4B's sliding layers
(head 256, window 1024: FA3, and with FA3 off our tiles for vLLM's kernel) and full layers (head 512: our head-512
kernel), canvases of 256 and 32 (a single-line suggestion: the small-canvas rows of the GPU's tiles file) over a ~1k
context, bidirectional, causal and per-request flags (a commit beside canvases).
Run by ``tests/gpu/run_device.sh attention`` (docs/gpu.md).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: run tests/gpu/run_device.sh"),
]

QH, KVH, BLOCK = 16, 2, 64


class ScalesOnlyLayer(SimpleNamespace):
    """Stands in for vLLM's ``Attention`` layer: unit q / k / v scales, all that ``forward`` reads of it."""

    def __init__(self) -> None:
        one = torch.ones((), device="cuda", dtype=torch.float32)
        super().__init__(_q_scale=one, _k_scale=one, _v_scale=one, _prob_scale=one, _q_scale_float=1.0,
                         _k_scale_float=1.0, _v_scale_float=1.0)  # fmt: skip


def test_the_attention_piece_is_active_on_the_staged_vllm() -> None:
    import vllm
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    from dgemma_lsp.backend import vllm_plugin
    from dgemma_lsp.backend.vllm_support import plugin_lines

    assert "attention" in vllm_plugin.active_features({}), vllm.__version__
    vllm_plugin.register()  # every vLLM process: TRITON_ATTN stays vLLM's
    assert AttentionBackendEnum.TRITON_ATTN.get_path() != vllm_plugin.ATTENTION_BACKEND
    vllm_plugin.activate()  # a process that builds DiffusionGemma (our classes call it first)
    assert AttentionBackendEnum.TRITON_ATTN.get_path() == vllm_plugin.ATTENTION_BACKEND
    assert "attention" in dict(plugin_lines(vllm.__version__, {}))["  active"].split(", ")
    from dgemma_lsp.backend import vllm_attention_backend as ab

    assert ab.FA3_OK, "FA3 does not load from the staged vLLM (the kit must carry _vllm_fa3_C)"
    assert ab.TUNING is not None  # the shipped tiles of this GPU (H200, H100)
    assert ab.is_quantized_kv_cache.__module__ == "vllm.v1.kv_cache_interface"  # where 0.33 and 0.34 keep it


def _metadata(causal, qlen: list[int], seqk: list[int], table: torch.Tensor, head: int):
    from vllm.v1.attention.backends.triton_attn import TritonAttentionMetadata

    dev = "cuda"
    n = sum(qlen)
    segments = 16
    given = {
        "num_actual_tokens": n,
        "max_query_len": max(qlen),
        "query_start_loc": torch.tensor([0, *torch.tensor(qlen).cumsum(0).tolist()], dtype=torch.int32, device=dev),
        "max_seq_len": max(seqk),
        "seq_lens": torch.tensor(seqk, dtype=torch.int32, device=dev),
        "block_table": table,
        "slot_mapping": torch.zeros(n, dtype=torch.int64, device=dev),
        "seq_threshold_3D": 0,  # canvases take the 2D kernel anyway (more than one query row)
        "num_par_softmax_segments": segments,
        "softmax_segm_output": torch.empty(1, QH, segments, head, device=dev),
        "softmax_segm_max": torch.empty(1, QH, segments, device=dev),
        "softmax_segm_expsum": torch.empty(1, QH, segments, device=dev),
        "causal": causal,
    }
    fields = {f.name for f in dataclasses.fields(TritonAttentionMetadata)}
    return TritonAttentionMetadata(**{k: v for k, v in given.items() if k in fields})


def _case(batch: int, head: int, seed: int, canvas: int):
    g = torch.Generator().manual_seed(seed)
    ctx = [1024 + 37 * i for i in range(batch)]  # contexts not on a block boundary
    qlen = [canvas] * batch
    seqk = [c + q for c, q in zip(ctx, qlen, strict=True)]
    per = [-(-s // BLOCK) for s in seqk]
    nblocks = sum(per) + 3
    kv = torch.randn(nblocks, KVH, BLOCK, 2 * head, generator=g).to("cuda", torch.bfloat16)  # vLLM's layout
    perm = torch.randperm(nblocks, generator=g)  # scattered blocks, as a long-running cache has them
    table = torch.zeros(batch, max(per), dtype=torch.int32)
    used = 0
    for i, n in enumerate(per):
        table[i, :n] = perm[used : used + n]
        used += n
    q = torch.randn(sum(qlen), QH, head, generator=g).to("cuda", torch.bfloat16)
    return q, kv, qlen, seqk, table.to("cuda")


def _impls(head: int, window: int | None):
    from vllm.v1.attention.backend import AttentionType
    from vllm.v1.attention.backends.triton_attn import TritonAttentionImpl

    from dgemma_lsp.backend.vllm_attention_backend import DGemmaTritonAttentionImpl

    kw = dict(num_heads=QH, head_size=head, scale=head**-0.5, num_kv_heads=KVH, alibi_slopes=None,
              sliding_window=window, kv_cache_dtype="auto", logits_soft_cap=None, attn_type=AttentionType.DECODER,
              kv_sharing_target_layer_name=None, sinks=None)  # fmt: skip
    return TritonAttentionImpl(**kw), DGemmaTritonAttentionImpl(**kw)


@pytest.mark.parametrize("canvas", [256, 32])
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("path", ["fa3", "tiles", "wide"])
def test_canvas_attention_matches_vllm_s_triton_attn(batch: int, path: str, canvas: int) -> None:
    head, window = (512, None) if path == "wide" else (256, 1024)
    vllm_impl, ours = _impls(head, window)
    if path == "tiles":
        ours._fa3 = False  # the sliding layers without FA3: vLLM's kernel with our tiles
    assert {"fa3": ours._fa3, "tiles": not ours._fa3 and ours._tiles is not None, "wide": ours._wide is not None}[path]
    q, kv, qlen, seqk, table = _case(batch, head, seed=batch * 10 + head + canvas, canvas=canvas)
    layer = ScalesOnlyLayer()
    # per-request flags as the engine's DiffusionGemma model state hands them over: an int32 tensor
    per_request = (torch.arange(batch, device="cuda") % 2 == 0).to(torch.int32)
    flags = [False, True] if batch == 1 else [False, True, per_request]
    for causal in flags:
        md = _metadata(causal, qlen, seqk, table, head)
        want = vllm_impl.forward(layer, q, q, q, kv, md, torch.zeros_like(q))
        md = _metadata(causal, qlen, seqk, table, head)  # a fresh object: ours keeps per-step state on it
        got = ours.forward(layer, q, q, q, kv, md, torch.full_like(q, float("nan")))
        torch.testing.assert_close(
            got.float(), want.float(), atol=2e-2, rtol=2e-2, msg=f"{path} canvas {canvas} causal={causal}"
        )
