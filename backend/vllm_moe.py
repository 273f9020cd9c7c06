"""The FP8 variant's MoE with its activation quantization fused (the plugin's ``moe_quant`` piece, vLLM 0.26-0.31).

With fp8 weights and per-token fp8 activations (the FP8 variant's FP8_DYNAMIC scheme) and vLLM's Triton fused-MoE
experts (``vllm_moe_backend: triton``), each MoE layer quantizes its input with vLLM's per-token kernel in the
prepare step, runs the experts' first GEMM, the gated activation, the per-token kernel again on the 8x wider
intermediate, and the second GEMM: 1.47 ms of quantizer and activation kernels a step at batch 4 on the H200
(bench/RESULTS.md). Here :func:`fused_experts_fp8` quantizes the input with
:func:`~.kernels.act_quant.act_quant` and computes ``act(gate) * up`` and its quantization in one launch (0.60 ms
a step); the GEMMs, routing and reduction are vLLM's own calls with the same arguments, and the quantized values are
the same numbers (GPU tests: bit for bit against vLLM's quantizer). Measured: batch 4 20.51 -> 19.59 ms, batch 1
10.42 -> 10.13 (FP8_DYNAMIC, Triton's MoE, random weights).

How it reaches the model: vLLM builds the experts object (``TritonExperts``) while processing the loaded weights;
our model state (built after that) sets the ``__class__`` of each such object whose configuration this path covers
to :func:`experts_class`'s subclass (no vLLM class is modified). The subclass tells the prepare step to hand over
unquantized inputs (vLLM's own ``expects_unquantized_inputs`` switch) and runs :func:`fused_experts_fp8`; any call
outside the covered configuration goes to vLLM's ``apply``.
"""

from __future__ import annotations

from typing import Any

import torch

from .kernels import act_quant as _aq
from .kernels.act_quant import act_quant
from .kernels.moe_gated import gated_gemm

# vLLM's MoEActivation values this path computes: the kernel's gated activations (the rest go to vLLM's apply)
ACTIVATIONS = tuple(a for a in _aq.ACTIVATIONS if a)
# Where vLLM's config has blocks of >= 64 rows (batch 4 and up) the experts' first GEMM writes act(gate) * up itself
# (.kernels.moe_gated: half the intermediate's bytes; H200, batch 4: 0.12 ms a step less). Below that vLLM's kernel
# swaps its operands on the H200, which ours does not: vLLM's first GEMM, then act_quant's gated kernel.
GATED_GEMM_MIN_BLOCK_M = 64


def covered(experts: Any) -> bool:
    """True for an experts object whose configuration :func:`fused_experts_fp8` reproduces: fp8 weights with
    per-token dynamic fp8 activations, no block quantization, no static activation scales, no LoRA, no emulation."""
    qc = getattr(experts, "quant_config", None)
    if qc is None:
        return False
    return bool(
        getattr(qc, "use_fp8_w8a8", False)
        and getattr(experts, "per_act_token_quant", False)
        and getattr(experts, "block_shape", None) is None
        and getattr(qc, "a1_scale", None) is None
        and getattr(qc, "a2_scale", None) is None
        and getattr(qc, "quant_dtype", None) == torch.float8_e4m3fn
        and getattr(qc, "gemm1_clamp_limit", None) is None
        and not getattr(experts, "quantization_emulation", False)
        and getattr(experts, "_lora_context", None) is None
    )


def fused_experts_fp8(
    hidden_states: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    w1_scale: torch.Tensor,
    w2_scale: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    activation: str,
    *,
    output: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
    global_num_experts: int = -1,
    expert_map: torch.Tensor | None = None,
    apply_router_weight_on_input: bool = False,
    w1_bias: torch.Tensor | None = None,
    w2_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """vLLM's Triton fused MoE (fp8 weights, per-token fp8 activations) for bf16 ``hidden_states`` (M, K),
    with our quantization launches; ``w1`` (E, 2N, K), ``w2`` (E, K, N) fp8 with per-channel scales. ``workspace``
    holds both (M, top_k, 2N) and (M, top_k, K) (vLLM's workspace2); ``output`` (M, K)."""
    from vllm.model_executor.layers.fused_moe.experts import triton_moe as tm
    from vllm.triton_utils import tl

    if activation not in ACTIVATIONS:
        raise ValueError(f"activation {activation!r} is not one of {ACTIVATIONS}")
    num_tokens, k = hidden_states.shape
    e, n2, _ = w1.shape
    top_k = topk_ids.shape[1]
    if global_num_experts == -1:
        global_num_experts = e
    a1q, a1_scale = act_quant(hidden_states, None)
    config = tm.try_get_optimal_moe_config(w1.size(), w2.size(), top_k, "fp8_w8a8", num_tokens, block_shape=None)
    compute_type = tl.bfloat16  # what vLLM's apply uses for fp8 inputs
    need = num_tokens * top_k * max(n2, k)
    if workspace is None or workspace.numel() < need:
        workspace = torch.empty(need, dtype=hidden_states.dtype, device=hidden_states.device)
    cache1 = tm._resize_cache(workspace, (num_tokens, top_k, n2))
    cache3 = tm._resize_cache(workspace, (num_tokens, top_k, k))
    sorted_token_ids, expert_ids, num_tokens_post_padded = tm._prepare_expert_assignment(
        topk_ids, config, num_tokens, top_k, global_num_experts, expert_map, block_shape=None
    )
    gemm = dict(compute_type=compute_type, use_fp8_w8a8=True, use_int8_w8a8=False, use_int8_w8a16=False,
                use_int4_w4a16=False, per_channel_quant=True, block_shape=None)  # fmt: skip
    # our kernels' launch (vLLM's row blocks, no operand swap): vLLM's alignment, no expert map, no bias
    ours_fit = sorted_token_ids is not None and expert_map is None and config["BLOCK_SIZE_M"] >= GATED_GEMM_MIN_BLOCK_M
    if ours_fit and w1_bias is None:
        inter = tm._resize_cache(workspace, (num_tokens * top_k, n2 // 2))
        gated_gemm(a1q, a1_scale, w1, w1_scale, inter, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k,
                   activation, config)  # fmt: skip
        a2q, a2_scale = act_quant(inter, None)
    else:
        tm.invoke_fused_moe_triton_kernel(
            a1q, w1, cache1, a1_scale, w1_scale, None, sorted_token_ids, expert_ids, num_tokens_post_padded,
            False, top_k, config, B_bias=w1_bias, **gemm,
        )  # fmt: skip
        # cache1 is dead once quantized, so cache3 may reuse its memory (as in vLLM)
        a2q, a2_scale = act_quant(cache1.view(-1, n2), activation)
    if output is None:
        output = torch.empty((num_tokens, k), dtype=hidden_states.dtype, device=hidden_states.device)
    tm.invoke_fused_moe_triton_kernel(
        a2q, w2, cache3, a2_scale, w2_scale, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
        not apply_router_weight_on_input, 1, config, B_bias=w2_bias, **gemm,
    )  # fmt: skip
    from vllm import _custom_ops as ops

    ops.moe_sum(cache3, output)
    return output


_CLASS: list[type] = []


def experts_class() -> type:
    """The subclass of vLLM's ``TritonExperts`` that runs :func:`fused_experts_fp8` (built once, on first use)."""
    if _CLASS:
        return _CLASS[0]
    from vllm.model_executor.layers.fused_moe.experts.triton_moe import TritonExperts

    class DGemmaTritonExperts(TritonExperts):
        @property
        def expects_unquantized_inputs(self) -> bool:
            # covered configurations quantize their own input (in apply); vLLM's rule otherwise
            return covered(self) or super().expects_unquantized_inputs

        def apply(self, output, hidden_states, w1, w2, topk_weights, topk_ids, activation, global_num_experts,
                  expert_map, a1q_scale, a2_scale, workspace13, workspace2, expert_tokens_meta,
                  apply_router_weight_on_input):  # fmt: skip
            act = getattr(activation, "value", activation)
            if (
                covered(self)
                and act in ACTIVATIONS
                and a1q_scale is None
                and a2_scale is None
                and hidden_states.dtype == torch.bfloat16
            ):
                fused_experts_fp8(
                    hidden_states, w1, w2, self.w1_scale, self.w2_scale, topk_weights, topk_ids, act,
                    output=output, workspace=workspace2, global_num_experts=global_num_experts,
                    expert_map=expert_map, apply_router_weight_on_input=apply_router_weight_on_input,
                    w1_bias=self.w1_bias, w2_bias=self.w2_bias,
                )  # fmt: skip
                return
            # vLLM's path; it quantizes the unquantized input itself (expects_unquantized_inputs)
            super().apply(output, hidden_states, w1, w2, topk_weights, topk_ids, activation, global_num_experts,
                          expert_map, a1q_scale, a2_scale, workspace13, workspace2, expert_tokens_meta,
                          apply_router_weight_on_input)  # fmt: skip

    _CLASS.append(DGemmaTritonExperts)
    return DGemmaTritonExperts


def install(model: Any) -> int:
    """Give each covered ``TritonExperts`` object in ``model`` the subclass; returns how many were switched."""
    from vllm.model_executor.layers.fused_moe.experts.triton_moe import TritonExperts

    cls = experts_class()
    switched = 0
    for module in model.modules():
        kernel = getattr(getattr(module, "quant_method", None), "moe_kernel", None)
        experts = getattr(kernel, "fused_experts", None)
        if type(experts) is TritonExperts and covered(experts):
            experts.__class__ = cls
            switched += 1
    return switched
