"""Training-only forwards for the small model: a dense experts forward (registered in transformers'
``ExpertsInterface``) and, below, cheaper router and RMS norm forwards (``use_fast_layers``).

With 4 experts and top-2 routing every expert runs on every token and the outputs are mixed with a dense
``(tokens, experts)`` weight matrix that is zero off the chosen experts: the same function and gradients as
the sparse forward (an unchosen expert gets weight 0, so no gradient either), at twice the expert FLOPs, but as
plain batched matmuls, free of host syncs: the sparse forwards sort tokens by expert, and with fp32 master weights
transformers' grouped matmul falls back to a loop that reads the per-expert counts back to the host in every layer.

Training only; checkpoints are saved without them (serving uses transformers' own forwards).
"""

from __future__ import annotations

from typing import Any

NAME = "dgemma_dense"


def dense_experts_forward(self: Any, hidden_states: Any, top_k_index: Any, top_k_weights: Any) -> Any:
    import torch

    mix = torch.zeros(
        hidden_states.shape[0], self.num_experts, dtype=top_k_weights.dtype, device=hidden_states.device
    ).scatter(1, top_k_index, top_k_weights)
    gate_up = torch.einsum("th,eoh->teo", hidden_states, self.gate_up_proj)
    gate, up = gate_up.chunk(2, dim=-1)
    out = torch.einsum("tei,ehi->teh", self.act_fn(gate) * up, self.down_proj)
    return (out * mix.unsqueeze(-1).to(out.dtype)).sum(1).to(hidden_states.dtype)


def use_dense_experts(model: Any, on: bool = True) -> None:
    """Switch every experts module of ``model`` to the dense forward (``on=False``: back to what it used)."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    if NAME not in ALL_EXPERTS_FUNCTIONS:
        ALL_EXPERTS_FUNCTIONS.register(NAME, dense_experts_forward)
    for m in model.modules():
        if hasattr(m, "gate_up_proj") and hasattr(m, "down_proj") and hasattr(m, "config"):
            current = m.config._experts_implementation
            if on and current != NAME:
                m._dgemma_default_experts = current
                m.config._experts_implementation = NAME
            elif not on and current == NAME:
                m.config._experts_implementation = getattr(m, "_dgemma_default_experts", "grouped_mm")


# --- training-only layers: the same functions, fewer and cheaper GPU kernels (profile: bench/train_step.py) ------------


def _gather_router_forward(self: Any, hidden_states: Any) -> tuple[Any, Any, Any]:
    """``DiffusionGemmaTextRouter.forward`` with ``per_expert_scale`` picked by ``gather``: indexing a 4-entry
    parameter with every token's choices has an accumulating ``index_put`` as its backward (1.6 ms per layer on the
    H200, a fifth of the step); a gather's backward is a ``(tokens, experts)`` scatter and a sum."""
    import torch

    hidden_states = self.norm(hidden_states)
    hidden_states = hidden_states * self.scale * self.scalar_root_size
    router_probabilities = torch.nn.functional.softmax(self.proj(hidden_states), dim=-1, dtype=torch.float32)
    top_k_weights, top_k_index = torch.topk(router_probabilities, k=self.config.top_k_experts, dim=-1)
    top_k_weights = top_k_weights / top_k_weights.sum(dim=-1, keepdim=True)
    scale = self.per_expert_scale.unsqueeze(0).expand(top_k_index.shape[0], -1).gather(1, top_k_index)
    return router_probabilities, top_k_weights * scale, top_k_index


def _fused_rms_norm_forward(self: Any, hidden_states: Any) -> Any:
    """``DiffusionGemmaRMSNorm.forward`` as one ``torch.rms_norm`` call in fp32 (a fused kernel on CUDA) instead of
    seven elementwise kernels and a reduction; ``x * (mean(x^2) + eps)^-0.5 * weight`` either way. The weight is a
    separate multiply: the fused backward's weight gradient (a column reduction over every token) took 142 us a call
    on the H200; a multiply's backward is a product and a plain sum (not yet timed on the GPU)."""
    import torch

    eps = self.eps if hasattr(self, "eps") else self.variance_epsilon  # transformers >= 5.25 names it so
    normed = torch.rms_norm(hidden_states.float(), (hidden_states.shape[-1],), None, eps)
    if self.with_scale:
        normed = normed * self.weight.float()
    return normed.type_as(hidden_states)


_FAST = {"DiffusionGemmaTextRouter": _gather_router_forward, "DiffusionGemmaRMSNorm": _fused_rms_norm_forward}


def use_fast_layers(model: Any, on: bool = True) -> int:
    """Give ``model``'s routers and RMS norms the forwards above (``on=False``: back to transformers' own); returns
    how many modules changed. Per instance, for training only: parameters, state dict and saved checkpoints are
    untouched, and serving runs transformers' classes."""
    import types

    n = 0
    for m in model.modules():
        fwd = _FAST.get(type(m).__name__)
        if fwd is None:
            continue
        if on:
            m.forward = types.MethodType(fwd, m)
        elif "forward" in m.__dict__:
            del m.forward
        n += 1
    return n
