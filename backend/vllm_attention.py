"""Attention for DiffusionGemma's canvas passes on Hopper: the launches behind the plugin's ``attention`` piece.

A denoising step sends 256 query rows per request through ``TRITON_ATTN``. vLLM launches its unified attention
kernel with decode-sized tiles there (16 rows by 32 keys, 4 warps): profiled on the H200 (vLLM 0.26, bench/RESULTS.md),
attention took 3.9 of a step's 15.7 ms of kernel time at batch 1 and 14.4 of 36.6 ms at batch 4, for a few GFLOP.
The registry entry (:mod:`.vllm_attention_backend`) sends the calls with more than one query row per request
(denoising steps, the causal commit step, prompt prefill) here and every other call to vLLM unchanged:

* head sizes 64-256 (the 25 sliding layers) to FlashAttention-3 (:func:`fa3_canvas_attention`) where vLLM's FA3
  kernels load, with FA3's scheduler metadata made once per step inside the CUDA graph (:func:`fa3_plans`);
* head size 512 (the five full layers) to our kernel (:mod:`.kernels.wide_attention`) with the GPU's wide tiles
  per call size;
* anything else with those two absent to vLLM's own kernel with the GPU's tiles (:func:`launch_canvas_attention`).

The tiles vary per GPU, so they are data (``attention_configs/device_name=<GPU>.json``, :func:`attention_tuning`):
the H200's are its sweeps' picks (``bench/gpu_step.py --parts attention``, ``bench/wide_sweep.py``). On a GPU without
a file the head-512 calls and the tile overrides stay vLLM's own; FA3 serves wherever it loads. FA3 has one
causal flag per call, while a denoising batch may hold a commit step (causal) beside canvases (bidirectional), and
CUDA graphs fix the launches before the flags are known; so a call with per-request flags runs two FA3 passes, each
over the rows of the requests its flag serves. Nothing here imports vLLM at its top.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

# FA3's own heuristic (0) sizes its KV splits from max_seqlen_k, which vLLM passes as max_model_len: many near-empty
# splits for a 1k context. One split per query tile keeps the canvas call to a single pass.
DEFAULT_FA3_SPLITS = 1
FA3_HEADS = (64, 96, 128, 192, 256)  # head sizes vLLM's FA3 build has kernels for (not 512: the full layers)

# our own kernel for head 512 (backend/kernels/wide_attention.py): block_m rows (queries x the KV head's query heads),
# block_n keys, d_split programs over the output columns, warps, stages, key-range splits per request (0 = enough to
# fill the GPU's SMs, from static shapes)
WideTiles = tuple[int, int, int, int, int, int]
WIDE_HEADS = (512,)  # the full-attention layers; FA3 takes 64-256
CONFIG_DIR = Path(__file__).parent / "attention_configs"


@dataclass(frozen=True)
class AttentionTuning:
    """One GPU's tiles. ``tiles``: head size -> (BLOCK_M query rows x heads, TILE_SIZE keys, num_warps, num_stages)
    for vLLM's kernel. ``wide``: (largest call in query rows or None for the rest, tiles), first match wins, for our
    head-512 kernel; its tiles are block_m rows (queries x the KV head's query heads), block_n keys, d_split programs
    over the output columns, warps, stages, key-range splits per request (0 = enough to fill the GPU's SMs).
    ``fa3_splits``: (largest call in query rows or None, FA3's key-range splits), first match wins; a small canvas
    (32 rows) leaves most SMs idle with one split, a 256-row canvas fills them (absent: one split for every call)."""

    tiles: dict[int, tuple[int, int, int, int]]
    wide: tuple[tuple[int | None, WideTiles], ...]
    fa3_splits: tuple[tuple[int | None, int], ...] = ((None, DEFAULT_FA3_SPLITS),)


def config_path(device_name: str) -> Path:
    """The tiles file of a GPU named ``device_name`` (torch's name; vLLM's fused-MoE file naming)."""
    return CONFIG_DIR / f"device_name={device_name.replace(' ', '_')}.json"


def attention_tuning(device_name: str) -> AttentionTuning | None:
    """The tiles measured on ``device_name``, or None when none were (the file is absent). A malformed file raises
    ``ValueError`` naming it: a wrong tile must not launch silently."""
    path = config_path(device_name)
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        tiles = {int(h): _ints(t, 4) for h, t in raw["tiles"].items()}
        wide = tuple((None if lim is None else int(lim), _ints(t, 6)) for lim, t in raw["wide"])
        splits = tuple(
            (None if lim is None else int(lim), _ints([n], 1)[0])
            for lim, n in raw.get("fa3_splits", [[None, DEFAULT_FA3_SPLITS]])
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: not an attention tiles file ({e})") from e
    if not wide:
        raise ValueError(f"{path}: 'wide' lists no tiles")
    if not splits or any(not 1 <= n <= 64 for _, n in splits):
        raise ValueError(f"{path}: 'fa3_splits' must list splits in 1..64")
    return AttentionTuning(tiles, wide, splits)


def _ints(t: Any, n: int) -> Any:
    if not isinstance(t, list) or len(t) != n or not all(isinstance(x, int) and x >= 0 for x in t):
        raise ValueError(f"{t!r} is not {n} non-negative integers")
    return tuple(t)


def wide_tiles_for(wide: tuple[tuple[int | None, WideTiles], ...], rows: int) -> WideTiles:
    """The tiles a call of ``rows`` query rows takes: the first item whose limit (query rows) it fits, else the last."""
    for limit, tiles in wide:
        if limit is None or rows <= limit:
            return tiles
    return wide[-1][1]


def fa3_splits_for(splits: tuple[tuple[int | None, int], ...], rows: int) -> int:
    """FA3's key-range splits for a call of ``rows`` query rows: the first item whose limit it fits, else the last."""
    for limit, n in splits:
        if limit is None or rows <= limit:
            return n
    return splits[-1][1]


def fa3_available() -> bool:
    """vLLM's FlashAttention-3 kernels import here (vLLM wheels ship them; the device kits keep them) and
    take the arguments :func:`_fa3_pass` gives them (vLLM 0.33's and 0.34's op: 37, ``seqused_q`` 11th)."""
    try:
        from vllm.vllm_flash_attn import flash_attn_interface as fai
    except Exception:  # noqa: BLE001 - no vLLM, no FA build: the tiles serve
        return False
    if not getattr(fai, "FA3_AVAILABLE", False):
        return False
    try:
        import torch

        names = [a.name for a in torch.ops._vllm_fa3_C.fwd.default._schema.arguments]
    except Exception:  # noqa: BLE001 - no schema to read: trust the import
        return True
    return fa3_signature_ok(names)


def fa3_signature_ok(names: list[str]) -> bool:
    """The FA3 op's argument names fit :func:`_fa3_pass`'s positional call (another vLLM may have moved them)."""
    return len(names) >= 37 and (names[10] == "seqused_q" if "seqused_q" in names else True)


def _fa3_pass(
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    cu_seqlens_q: Any,
    seqused_q: Any,
    seqused_k: Any,
    max_seqlen_q: int,
    max_seqlen_k: int,
    block_table: Any,
    softmax_scale: float,
    causal: bool,
    window: tuple[int, int],
    softcap: float,
    num_splits: int,
    plan: Any = None,
) -> None:
    """One FA3 forward over the paged cache: vLLM's ``flash_attn_varlen_func(fa_version=3)`` call, plus ``seqused_q``
    (the wrapper passes None): FA3 computes and writes only the first ``seqused_q[i]`` query rows of request i.
    ``plan``: this pass's scheduler metadata from :func:`fa3_plan` (None: FA3 computes it, one more launch)."""
    import torch

    torch.ops._vllm_fa3_C.fwd(
        q, k, v, None, None, None, out,
        cu_seqlens_q, None, None, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, block_table,
        None, None, None, None, None, None, None, None,
        softmax_scale, causal, window[0], window[1], softcap, True, plan, num_splits, None, 0, None, 1, 0, None,
    )  # fmt: skip


def _fa3_window(window_size: tuple[int, int] | None, is_causal: bool) -> tuple[int, int]:
    """FA3's window for vLLM's TRITON_ATTN masking: a causal request looks ``left`` back, a bidirectional one
    ``left`` either side (as ``kernel_unified_attention`` masks non-causal sliding windows)."""
    left = window_size[0] if window_size is not None else -1
    return (-1, -1) if left < 0 else (left, 0 if is_causal else left)


def fa3_plan(
    *,
    q: Any,
    k: Any,
    cu_seqlens_q: Any,
    seqused_q: Any,
    seqused_k: Any,
    max_seqlen_q: int,
    block_table: Any,
    causal: bool,
    window_size: tuple[int, int] | None,
    softcap: float,
    num_splits: int,
) -> Any:
    """FA3's scheduler metadata for one pass (``get_scheduler_metadata``, as vLLM's FlashAttention backend computes it
    once per step), from the same arguments :func:`_fa3_pass` gets, so that the pass skips its own
    ``prepare_varlen_num_blocks`` launch: the 25 sliding layers of a step share two plans instead of 50 launches.
    ``seqlen_k`` is the page table's span, what FA3's forward derives for a paged cache."""
    import torch

    window = _fa3_window(window_size, causal)
    page = k.shape[1]
    return torch.ops._vllm_fa3_C.get_scheduler_metadata(
        cu_seqlens_q.shape[0] - 1, max_seqlen_q, block_table.shape[1] * page, q.shape[1], k.shape[2], q.shape[2],
        q.shape[2], q.dtype, seqused_k, cu_seqlens_q, None, None, seqused_q, None, page, 0, causal, window[0],
        window[1], softcap > 0, num_splits, None, 0,
    )  # fmt: skip


def fa3_plans(
    *,
    q: Any,
    k: Any,
    cu_seqlens_q: Any,
    causal: Any,
    rows: tuple[Any, Any] | None,
    seqused_k: Any,
    max_seqlen_q: int,
    block_table: Any,
    window_size: tuple[int, int] | None,
    softcap: float,
    num_splits: int,
) -> tuple[Any, ...]:
    """The plans of :func:`fa3_canvas_attention`'s passes, in its order: one for a bool ``causal``; for per-request
    flags the bidirectional pass's (over ``rows[0]``) then the causal pass's (over ``rows[1]``, :func:`fa3_rows`)."""
    flags, used = ((causal,), (None,)) if isinstance(causal, bool) else ((False, True), cast(tuple[Any, Any], rows))
    return tuple(
        fa3_plan(
            q=q,
            k=k,
            cu_seqlens_q=cu_seqlens_q,
            seqused_q=u,
            seqused_k=seqused_k,
            max_seqlen_q=max_seqlen_q,
            block_table=block_table,
            causal=flag,
            window_size=window_size,
            softcap=softcap,
            num_splits=num_splits,
        )  # fmt: skip
        for flag, u in zip(flags, used, strict=True)
    )


def fa3_canvas_attention(
    *,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    cu_seqlens_q: Any,
    max_seqlen_q: int,
    seqused_k: Any,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: Any,
    window_size: tuple[int, int],
    block_table: Any,
    softcap: float,
    num_splits: int = DEFAULT_FA3_SPLITS,
    rows: tuple[Any, Any] | None = None,
    plans: tuple[Any, ...] | None = None,
) -> None:
    """vLLM's FA3 over the paged KV cache with vLLM's TRITON_ATTN masking: a causal request sees keys up to its query
    row (and ``window_size[0]`` back), a bidirectional one every key of its sequence within ``window_size[0]`` either
    side (as ``kernel_unified_attention`` masks non-causal sliding windows). ``causal`` is a bool or one flag per
    request (a tensor, read on the GPU only, so CUDA graphs can hold the call): then a bidirectional and a causal
    pass run, each over the rows of its own requests only (FA3's ``seqused_q``; the other pass leaves them alone), so
    the two cost about one. (The first version ran both passes over every row and selected after: against the
    plugin without FA3 on the same H200 it took batch 1 from 14.49 to 15.04 ms, this one from 14.22 to 13.94.)
    ``plans``: the passes' scheduler metadata (:func:`fa3_plan`; one for a bool ``causal``, bidirectional then causal
    for flags), or None."""

    def run(is_causal: bool, dst: Any, seqused_q: Any = None, plan: Any = None) -> None:
        _fa3_pass(q, k, v, dst, cu_seqlens_q, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, block_table,
                  softmax_scale, is_causal, _fa3_window(window_size, is_causal), softcap, num_splits,
                  plan)  # fmt: skip

    if isinstance(causal, bool):
        run(causal, out, plan=plans[0] if plans else None)
        return
    bidir_rows, causal_rows = rows if rows is not None else fa3_rows(cu_seqlens_q, causal)
    run(False, out, bidir_rows, plans[0] if plans else None)
    run(True, out, causal_rows, plans[1] if plans else None)


def fa3_rows(cu_seqlens_q: Any, causal: Any) -> tuple[Any, Any]:
    """Per request, the query rows of the bidirectional pass and of the causal pass (FA3's ``seqused_q``): four small
    kernels, so a step computes them once for all its layers (``DGemmaTritonAttentionImpl`` keeps them on the step's
    attention metadata) rather than once per layer."""
    num_seqs = causal.shape[0]
    qlen = cu_seqlens_q[1 : num_seqs + 1] - cu_seqlens_q[:num_seqs]
    causal_rows = qlen * causal.to(qlen.dtype)
    return qlen - causal_rows, causal_rows


def launch_canvas_attention(
    *,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    cu_seqlens_q: Any,
    seqused_k: Any,
    softmax_scale: float,
    causal: Any,
    window_size: tuple[int, int],
    block_table: Any,
    softcap: float,
    k_descale: Any,
    v_descale: Any,
    sinks: Any,
    tiles: tuple[int, int, int, int],
) -> None:
    """vLLM's ``kernel_unified_attention`` (2D path, unquantized KV) with our tiles: the arguments vLLM's
    ``unified_attention`` passes for this case, with BLOCK_M / TILE_SIZE / warps / stages from ``tiles``."""
    import triton
    from vllm.v1.attention.ops.triton_unified_attention import kernel_unified_attention
    from vllm.v1.kv_cache_interface import KVQuantMode

    block_m, tile, warps, stages = tiles
    num_seqs = len(seqused_k)
    num_query_heads, head_size = q.shape[1], q.shape[2]
    num_kv_heads = k.shape[2]
    per_kv = num_query_heads // num_kv_heads
    block_m = max(block_m, triton.next_power_of_2(per_kv))
    block_q = block_m // per_kv
    use_per_seq_causal = not isinstance(causal, bool)
    kernel_unified_attention[(q.shape[0] // block_q + num_seqs, num_kv_heads)](
        output_ptr=out,
        segm_output_ptr=None,
        segm_max_ptr=None,
        segm_expsum_ptr=None,
        query_ptr=q,
        key_cache_ptr=k,
        value_cache_ptr=v,
        sink_ptr=sinks,
        block_tables_ptr=block_table,
        seq_lens_ptr=seqused_k,
        alibi_slopes_ptr=None,
        qq_bias_ptr=None,
        k_scale_cache_ptr=None,
        v_scale_cache_ptr=None,
        scale=softmax_scale,
        q_scale=None,
        k_scale=k_descale,
        v_scale=v_descale,
        out_scale=1.0,
        softcap=softcap,
        num_query_heads=num_query_heads,
        num_queries_per_kv=per_kv,
        block_table_stride=block_table.stride(0),
        query_stride_0=q.stride(0),
        query_stride_1=q.stride(1),
        output_stride_0=out.stride(0),
        output_stride_1=out.stride(1),
        qq_bias_stride_0=0,
        BLOCK_SIZE=v.shape[1],
        TILE_SIZE=tile,
        HEAD_SIZE=head_size,
        HEAD_SIZE_PADDED=triton.next_power_of_2(head_size),
        USE_ALIBI_SLOPES=False,
        USE_ALIBI_SQRT=False,
        USE_QQ_BIAS=False,
        USE_SOFTCAP=softcap > 0,
        USE_SINKS=sinks is not None,
        SLIDING_WINDOW=1 + window_size[0],
        USE_CAUSAL=bool(causal) if not use_per_seq_causal else True,
        USE_PER_SEQ_CAUSAL=use_per_seq_causal,
        per_seq_causal_ptr=causal if use_per_seq_causal else None,
        USE_MM_PREFIX=False,
        MAX_MM_RANGES=0,
        mm_prefix_range_ptr=None,
        rswa_prefix_lens_ptr=seqused_k,
        R_SWA_WINDOW=0,
        USE_R_SWA=False,
        stride_k_cache_0=k.stride(0),
        stride_k_cache_1=k.stride(1),
        stride_k_cache_2=k.stride(2),
        stride_k_cache_3=k.stride(3),
        stride_v_cache_0=v.stride(0),
        stride_v_cache_1=v.stride(1),
        stride_v_cache_2=v.stride(2),
        stride_v_cache_3=v.stride(3),
        stride_ks_blk=None,
        stride_ks_slot=None,
        stride_ks_head=None,
        stride_vs_blk=None,
        stride_vs_slot=None,
        stride_vs_head=None,
        query_start_len_ptr=cu_seqlens_q,
        BLOCK_Q=block_q,
        num_seqs=num_seqs,
        BLOCK_M=block_m,
        NUM_SEGMENTS_PER_SEQ=1,
        USE_FP8=False,
        IS_3D=False,
        KV_QUANT_MODE=KVQuantMode.NONE,
        Q_IS_FP8=False,
        CHUNK_LOOKBACK=-1,
        CHUNK_SIZE=-1,
        USE_TD=False,
        USE_TD_QO=False,
        MM_PREFIX_CLAMP_SW=False,
        num_warps=warps,
        num_stages=stages,
    )
