"""Attention tiles for DiffusionGemma's canvas passes on Hopper (the plugin's ``attention`` piece, vLLM 0.26-0.31).

A denoising step sends 256 query rows per request through ``TRITON_ATTN``. vLLM 0.26 launches its unified attention
kernel with decode-sized tiles there (16 rows by 32 keys, 4 warps): profiled on the H200 (bench/RESULTS.md),
attention took 3.9 of a step's 15.7 ms of kernel time at batch 1 and 14.4 of 36.6 ms at batch 4, for a few GFLOP.
vLLM ships wider tiles for exactly this shape, but only on Blackwell (``tuned_large_head`` in
``triton_unified_attention.py``). This module launches the same vLLM kernel with tiles chosen per head size (a sweep
on the GPU picks them, ``bench/gpu_step.py --parts attention``), through a registry entry: ``TRITON_ATTN`` resolves to
a subclass of vLLM's backend whose implementation takes the calls with more than one query row per request
(denoising steps, the causal commit step, prompt prefill) and hands every other call to vLLM unchanged.

Tiles: ``DGEMMA_ATTN_TILES`` = ``head:block_m:tile:warps:stages`` items, comma separated (``256:32:128:8:2``);
unset = :data:`DEFAULT_TILES`.

FlashAttention-3 (``DGEMMA_ATTN_FA3``): where vLLM's FA3 kernels load (Hopper, head size 64-256: the 25 sliding
layers), canvas calls go to FA3 instead, reading the same paged KV cache. FA3 has one causal flag per call, while a
denoising batch may hold a commit step (causal) beside canvases (bidirectional), and CUDA graphs fix the launches
before the flags are known; so a call with per-request flags runs two FA3 passes, each over the rows of the requests
its flag serves. Nothing here runs without vLLM; the ``parse_*`` functions are pure.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

TILES_ENV = "DGEMMA_ATTN_TILES"
# head size -> (BLOCK_M query rows x heads, TILE_SIZE keys, num_warps, num_stages): the fastest of the sweep on the
# H200 (bench/RESULTS.md; 256 happens to be vLLM's own Blackwell tuning); 512 = the full-attention layers
DEFAULT_TILES: dict[int, tuple[int, int, int, int]] = {256: (32, 128, 8, 2), 512: (32, 32, 4, 2)}


def check_powers_of_two(env: str, item: str | None, **fields: int) -> None:
    """Refuse, naming the variable, a tile field that is not a power of two (Triton's block shapes)."""
    for name, val in fields.items():
        if val < 1 or val & (val - 1):
            raise ValueError(f"{env}: {name} must be a power of two (got {val} in {item!r})")


def parse_tiles(raw: str | None) -> dict[int, tuple[int, int, int, int]]:
    """``"256:32:128:8:2,512:32:32:8:1"`` -> {256: (32, 128, 8, 2), ...}; empty or None -> the defaults."""
    if raw is None or not raw.strip():
        return dict(DEFAULT_TILES)
    if raw.strip().lower() in ("off", "none", "0"):
        return {}
    out: dict[int, tuple[int, int, int, int]] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        parts = item.split(":")
        if len(parts) != 5 or not all(p.isdigit() for p in parts):
            raise ValueError(f"{TILES_ENV}: {item!r} is not head:block_m:tile:warps:stages (e.g. 256:32:128:8:2)")
        head, block_m, tile, warps, stages = (int(p) for p in parts)
        check_powers_of_two(TILES_ENV, item, block_m=block_m, tile=tile, warps=warps)
        out[head] = (block_m, tile, warps, max(1, stages))
    return out


FA3_ENV = "DGEMMA_ATTN_FA3"
# FA3's own heuristic (0) sizes its KV splits from max_seqlen_k, which vLLM passes as max_model_len: many near-empty
# splits for a 1k context. One split per query tile keeps the canvas call to a single pass.
DEFAULT_FA3_SPLITS = 1
# FA3 for calls with at least this many requests (canvases), the tiles below it (DGEMMA_ATTN_FA3_MIN_REQS)
FA3_MIN_REQS_ENV = "DGEMMA_ATTN_FA3_MIN_REQS"
FA3_HEADS = (64, 96, 128, 192, 256)  # head sizes vLLM's FA3 build has kernels for (not 512: the full layers)


def parse_fa3(raw: str | None) -> int | None:
    """``DGEMMA_ATTN_FA3``: unset / ``on`` -> the default split count; ``off`` -> None (tiles only); a number ->
    FA3's ``num_splits`` (0: FA3's heuristic)."""
    val = (raw or "").strip().lower()
    if val in ("", "on", "auto"):
        return DEFAULT_FA3_SPLITS
    if val in ("off", "none", "no", "false"):
        return None
    if not val.isdigit():
        raise ValueError(f"{FA3_ENV}: {raw!r} is not on, off or a split count (e.g. 1)")
    return int(val)


FA3_PLAN_ENV = "DGEMMA_ATTN_FA3_PLAN"


def parse_switch(env: str, raw: str | None, default: bool = True) -> bool:
    """An on/off variable: unset -> ``default``; ``on/1/yes/true`` or ``off/0/no/false``; anything else is refused."""
    val = (raw or "").strip().lower()
    if not val:
        return default
    if val in ("on", "1", "yes", "true"):
        return True
    if val in ("off", "0", "no", "false"):
        return False
    raise ValueError(f"{env}: {raw!r} is not on or off")


def parse_min_reqs(raw: str | None) -> int:
    """``DGEMMA_ATTN_FA3_MIN_REQS``: unset -> 1 (FA3 from one canvas up); else a whole number >= 1."""
    val = (raw or "").strip()
    if not val:
        return 1
    if not val.isdigit() or int(val) < 1:
        raise ValueError(f"{FA3_MIN_REQS_ENV}: {raw!r} is not a whole number >= 1")
    return int(val)


T = TypeVar("T")

WIDE_ENV = "DGEMMA_ATTN_WIDE"
# our own kernel for head 512 (backend/kernels/wide_attention.py): block_m rows (queries x the KV head's query heads),
# block_n keys, d_split programs over the output columns, warps, stages, key-range splits per request (0 = enough to
# fill the GPU's SMs, from static shapes)
WideTiles = tuple[int, int, int, int, int, int]
# (largest call in query rows or None for the rest, tiles), first match wins: the H200 sweep's picks:
# one canvas splits its key ranges in two (0.078 ms per call against 0.117 unsplit, 0.151 for vLLM's launch), four
# canvases take as many splits as fill the SMs (0.237 ms, the same as unsplit; vLLM 0.567)
DEFAULT_WIDE: tuple[tuple[int | None, WideTiles], ...] = ((256, (128, 64, 2, 8, 1, 2)), (None, (128, 64, 2, 8, 1, 0)))
WIDE_HEADS = (512,)  # the full-attention layers; FA3 takes 64-256


def _parse_wide_tiles(raw: str, item: str) -> WideTiles:
    parts = item.split(":")
    if len(parts) not in (5, 6) or not all(p.isdigit() for p in parts) or any(int(p) < 1 for p in parts[:5]):
        raise ValueError(
            f"{WIDE_ENV}: {raw!r} is not on, off or block_m:block_n:d_split:warps:stages[:kv_splits][@rows],... "
            "(e.g. 128:32:2:8:2:2@256,128:64:2:8:1)"
        )
    block_m, block_n, d_split, warps, stages = (int(p) for p in parts[:5])
    kv_splits = int(parts[5]) if len(parts) == 6 else 1
    check_powers_of_two(WIDE_ENV, raw, block_m=block_m, block_n=block_n, d_split=d_split, warps=warps)
    return block_m, block_n, d_split, warps, stages, kv_splits


def parse_sized(
    env: str, raw: str, parse_spec: Callable[[str], T], *, last_unlimited: bool
) -> tuple[tuple[int | None, T], ...]:
    """Comma-separated ``spec[@max]`` items, each spec read by ``parse_spec``: a call of size n takes the first item
    with ``max >= n``, then the one without a limit (at most one; with ``last_unlimited`` exactly one, written last).
    Returns ``((max or None, value), ...)``, smallest limit first, the unlimited one last; refusals name ``env``."""
    items = [p.strip() for p in raw.split(",")]
    limited: list[tuple[int, T]] = []
    unlimited: list[tuple[None, T]] = []
    for i, item in enumerate(items):
        spec, at, limit = item.partition("@")
        if at and (not limit.isdigit() or int(limit) < 1):
            raise ValueError(f"{env}: {raw!r}: @{limit} is not a whole number >= 1")
        if last_unlimited and (i == len(items) - 1) == bool(at):
            raise ValueError(f"{env}: {raw!r}: every item but the last needs @max (a whole number), the last none")
        if at:
            limited.append((int(limit), parse_spec(spec)))
        else:
            unlimited.append((None, parse_spec(spec)))
    if len(unlimited) > 1:
        raise ValueError(f"{env}: {raw!r}: at most one item without @max")
    return (*sorted(limited, key=lambda x: x[0]), *unlimited)


def sized_pick(table: tuple[tuple[int | None, T], ...], n: int) -> T | None:
    """What :func:`parse_sized`'s table gives a call of size ``n`` (None: no item covers it)."""
    for limit, value in table:
        if limit is None or n <= limit:
            return value
    return None


def parse_wide(raw: str | None) -> tuple[tuple[int | None, WideTiles], ...] | None:
    """``DGEMMA_ATTN_WIDE``: unset / ``on`` -> :data:`DEFAULT_WIDE`; ``off`` -> None (the tiles serve head 512); else
    comma-separated ``block_m:block_n:d_split:warps:stages[:kv_splits]`` items (powers of two but stages and
    kv_splits; kv_splits 0 = fill the GPU, default 1), each but the last limited to calls of at most ``@rows`` query
    rows (e.g. ``128:32:2:8:2:2@256,128:64:2:8:1``: one canvas of 256 splits its key ranges, larger calls do not).
    Returns ``((max_rows or None, tiles), ...)``, smallest limit first."""
    val = (raw or "").strip().lower()
    if val in ("", "on", "auto"):
        return DEFAULT_WIDE
    if val in ("off", "none", "no", "false", "0"):
        return None
    return parse_sized(WIDE_ENV, val, lambda spec: _parse_wide_tiles(raw or "", spec), last_unlimited=True)


def wide_tiles_for(wide: tuple[tuple[int | None, WideTiles], ...], rows: int) -> WideTiles:
    """The tiles :func:`parse_wide`'s table gives a call of ``rows`` query rows (its last item has no limit)."""
    return sized_pick(wide, rows) or wide[-1][1]


def fa3_available() -> bool:
    """vLLM's FlashAttention-3 kernels import here (vLLM wheels ship them; the H200 kit adds them back, .kit4) and
    take the arguments :func:`_fa3_pass` gives them (written against vLLM 0.26's op: 37, ``seqused_q`` 11th)."""
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
    """vLLM's ``kernel_unified_attention`` (2D path, unquantized KV) with our tiles: the arguments vLLM 0.26's
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


_CLASSES: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    """The registry resolves ``dgemma_lsp.backend.vllm_attention.DGemmaTritonAttentionBackend``: the classes are built
    on first use, so importing this module never needs vLLM."""
    if name in ("DGemmaTritonAttentionBackend", "DGemmaTritonAttentionImpl"):
        if not _CLASSES:
            _CLASSES.update(_build_classes())
        return _CLASSES[name]
    raise AttributeError(name)


def _build_classes() -> dict[str, Any]:
    import torch
    from vllm.logger import init_logger
    from vllm.platforms import current_platform
    from vllm.utils.torch_utils import is_quantized_kv_cache
    from vllm.v1.attention.backend import AttentionType
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend, TritonAttentionImpl

    logger = init_logger(f"vllm.{__name__}")  # under "vllm": the engine process's only handlers
    tiles_by_head = parse_tiles(os.environ.get(TILES_ENV))
    fa3 = parse_fa3(os.environ.get(FA3_ENV))
    fa3_min_reqs = parse_min_reqs(os.environ.get(FA3_MIN_REQS_ENV))
    # FA3's scheduler metadata once per step for all sliding layers (else each pass computes its own)
    fa3_plan_on = parse_switch(FA3_PLAN_ENV, os.environ.get(FA3_PLAN_ENV))
    wide = parse_wide(os.environ.get(WIDE_ENV))
    # vLLM tunes this shape itself on Blackwell (capability 10.x): leave it there
    own_tuning = current_platform.is_device_capability_family(100)
    # FA3 is Hopper's (capability 9.x)
    fa3_ok = fa3 is not None and current_platform.is_device_capability_family(90) and fa3_available()

    class DGemmaTritonAttentionImpl(TritonAttentionImpl):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._tiles = None if own_tuning else tiles_by_head.get(self.head_size)
            self._fa3 = fa3_ok and self.head_size in FA3_HEADS and self.sinks is None
            # the wide kernel has no window, softcap or sinks: layers with any of them keep the tiles
            plain = self.sinks is None and tuple(self.sliding_window) == (-1, -1) and not self.logits_soft_cap
            self._wide = wide if (not own_tuning and self.head_size in WIDE_HEADS and plain) else None

        def forward(
            self,
            layer: Any,  # vLLM's attention layer (torch.nn.Module types its scales as Tensor | Module)
            query: torch.Tensor,
            key: torch.Tensor,
            value: torch.Tensor,
            kv_cache: torch.Tensor,
            attn_metadata: Any,
            output: torch.Tensor,
            output_scale: torch.Tensor | None = None,
            output_block_scale: torch.Tensor | None = None,
        ) -> torch.Tensor:
            md = attn_metadata
            ours = (
                (self._tiles is not None or self._fa3 or self._wide is not None)
                and md is not None
                and md.max_query_len > 1  # canvas-shaped; decode-shaped calls keep vLLM's split-KV path
                and output_scale is None
                and output_block_scale is None
                and self.attn_type not in (AttentionType.ENCODER_ONLY, AttentionType.ENCODER)
                and not self._is_per_token_head_quant
                and not is_quantized_kv_cache(self.kv_cache_dtype)
                and not self.use_td
                and self.alibi_slopes is None
                and self.chunk_lookback < 0
                and getattr(md, "mm_prefix_range_tensor", None) is None
                and getattr(md, "rswa_prefix_lens", None) is None
                and query.dtype in (torch.float16, torch.bfloat16)
            )
            if not ours:
                return super().forward(layer, query, key, value, kv_cache, md, output, output_scale, output_block_scale)
            n = md.num_actual_tokens
            key_cache, value_cache = kv_cache.transpose(1, 2).split(self.head_size, dim=-1)
            if self._fa3 and fa3 is not None and (self._tiles is None or md.seq_lens.shape[0] >= fa3_min_reqs):
                # one metadata object per step and KV group, shared by its layers (25 sliding layers in the 26B):
                # the pass rows and FA3's scheduler plans once per step, checked against what they came from
                kept = getattr(md, "_dgemma_fa3", None)
                if kept is None or kept["causal"] is not md.causal or kept["cu"] is not md.query_start_loc:
                    rows = None if isinstance(md.causal, bool) else fa3_rows(md.query_start_loc, md.causal)
                    kept = {"causal": md.causal, "cu": md.query_start_loc, "rows": rows, "plans": {}}
                    try:
                        md._dgemma_fa3 = kept
                    except AttributeError:  # a metadata class with slots: computed per layer
                        pass
                rows = kept["rows"]
                plans = None
                # only inside a CUDA graph capture: replays recompute them in the graph; in an eager step (prompt
                # prefill) making them cost the H200 ~20 ms of first-draft latency
                if fa3_plan_on and torch.cuda.is_current_stream_capturing():
                    shape = (query.shape[1], key_cache.shape[1:], tuple(self.sliding_window), self.logits_soft_cap,
                             md.block_table.shape[1], md.max_query_len)  # fmt: skip
                    plans = kept["plans"].get(shape)
                    if plans is None:
                        plans = fa3_plans(q=query, k=key_cache, cu_seqlens_q=md.query_start_loc, causal=md.causal,
                                          rows=rows, seqused_k=md.seq_lens, max_seqlen_q=md.max_query_len,
                                          block_table=md.block_table, window_size=self.sliding_window,
                                          softcap=self.logits_soft_cap, num_splits=fa3)  # fmt: skip
                        kept["plans"][shape] = plans
                fa3_canvas_attention(
                    q=query[:n],
                    k=key_cache,
                    v=value_cache,
                    out=output[:n],
                    cu_seqlens_q=md.query_start_loc,
                    max_seqlen_q=md.max_query_len,
                    seqused_k=md.seq_lens,
                    max_seqlen_k=md.max_seq_len,
                    softmax_scale=self.scale,
                    causal=md.causal,
                    window_size=self.sliding_window,
                    block_table=md.block_table,
                    softcap=self.logits_soft_cap,
                    num_splits=fa3,
                    rows=rows,
                    plans=plans,
                )
                return output
            if self._wide is not None:
                from .kernels.wide_attention import wide_attention

                block_m, block_n, d_split, warps, stages, kv_splits = wide_tiles_for(self._wide, n)
                try:
                    wide_attention(
                        q=query[:n],
                        k=key_cache,
                        v=value_cache,
                        out=output[:n],
                        cu_seqlens_q=md.query_start_loc,
                        seqused_k=md.seq_lens,
                        softmax_scale=self.scale,
                        causal=md.causal,
                        block_table=md.block_table,
                        block_m=block_m,
                        block_n=block_n,
                        d_split=d_split,
                        num_warps=warps,
                        num_stages=stages,
                        kv_splits=kv_splits or None,
                    )
                except Exception as exc:  # noqa: BLE001 - e.g. a Triton build that cannot compile it
                    logger.warning("dgemma: head-%d attention kernel failed (%s): tiles or vLLM's launch take over",
                                   self.head_size, exc)  # fmt: skip
                    self._wide = None
                else:
                    return output
            if self._tiles is None:  # FA3 or the wide kernel was configured, and this call is not theirs
                return super().forward(layer, query, key, value, kv_cache, md, output, output_scale, output_block_scale)
            descale_shape = (md.query_start_loc.shape[0] - 1, key_cache.shape[2])
            launch_canvas_attention(
                q=query[:n],
                k=key_cache,
                v=value_cache,
                out=output[:n],
                cu_seqlens_q=md.query_start_loc,
                seqused_k=md.seq_lens,
                softmax_scale=self.scale,
                causal=md.causal,
                window_size=self.sliding_window,
                block_table=md.block_table,
                softcap=self.logits_soft_cap,
                k_descale=layer._k_scale.expand(descale_shape),
                v_descale=layer._v_scale.expand(descale_shape),
                sinks=self.sinks,
                tiles=self._tiles,
            )
            return output

    class DGemmaTritonAttentionBackend(TritonAttentionBackend):
        @staticmethod
        def get_impl_cls() -> type:
            return DGemmaTritonAttentionImpl

    # vLLM names a backend by module + qualname and imports it again by that name (module __getattr__ above)
    DGemmaTritonAttentionImpl.__qualname__ = "DGemmaTritonAttentionImpl"
    DGemmaTritonAttentionBackend.__qualname__ = "DGemmaTritonAttentionBackend"
    return {
        "DGemmaTritonAttentionBackend": DGemmaTritonAttentionBackend,
        "DGemmaTritonAttentionImpl": DGemmaTritonAttentionImpl,
    }
