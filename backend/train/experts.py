"""A dense experts forward for training the small model (registered in transformers' ``ExpertsInterface``).

With 4 experts and top-2 routing every expert runs on every token and the outputs are mixed with a dense
``(tokens, experts)`` weight matrix that is zero off the chosen experts: the same function and gradients as
the sparse forward (an unchosen expert gets weight 0, so no gradient either), at twice the expert FLOPs, but as
plain batched matmuls, free of host syncs: the sparse forwards sort tokens by expert, and with fp32 master weights
transformers' grouped matmul falls back to a loop that reads the per-expert counts back to the host in every layer.

Training only; checkpoints are saved without it (serving uses transformers' default).
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
