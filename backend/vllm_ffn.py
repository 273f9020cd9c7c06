"""The dense MLP beside the MoE on a second CUDA stream (the plugin's ``ffn_overlap`` piece, vLLM 0.26-0.31).

Every DiffusionGemma layer has two feed-forward branches that read the same residual: a dense MLP (2816 -> 2 x 2112
-> 2816) and the router + 128-expert MoE; their outputs are normed and added. vLLM runs them one after the other. At a
denoising step's token counts they want different things: the MoE streams its experts' weights (1.5 GB a layer,
memory-bound), the dense MLP is a GEMM over 256-1024 rows (compute-bound at batch 4). This piece runs the MLP on a
second stream while the MoE runs on the step's stream, inside one custom op (``torch.ops.vllm.dgemma_ffn_overlap``),
so torch.compile sees one opaque call and a CUDA graph captures both branches with their fork and join.

How it reaches the model: our model class (a registry entry, the ``sampler`` piece) sets each MoE decoder layer's
``__class__`` to a subclass of vLLM's ``Gemma4DecoderLayer`` (:func:`build_layer_class`; no vLLM class is modified)
whose forward is vLLM 0.26's with the two branches going through the op. It does so only when vLLM's layer forward is
the one this copy was written against (:data:`KNOWN_FORWARDS`, a hash of its source): any other version keeps its own.

Measured on the H200 (bench/RESULTS.md): same tokens, no denoising step faster (most likely the fused-MoE
kernel's grid leaves no SM for the MLP's GEMM), commit steps slower; so the piece is opt-in.

``DGEMMA_FFN_OVERLAP_MIN_TOKENS`` (default 0): calls with fewer tokens run the branches in order on one stream.
"""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Callable
from typing import Any

MIN_TOKENS_ENV = "DGEMMA_FFN_OVERLAP_MIN_TOKENS"
OP_NAME = "dgemma_ffn_overlap"
# sha256 of ``inspect.getsource(Gemma4DecoderLayer.forward)`` of the vLLM versions whose forward
# :func:`build_layer_class` restates (0.26.0)
KNOWN_FORWARDS = frozenset({"4ea3e3e7da1b1f6117004ce26dd98e2aff56c3c61a11c15f5c8249c7f94b2228"})

_LAYERS: dict[str, Any] = {}  # op key -> decoder layer (the op finds its layer by name, as vLLM's MoE op does)
_STATE: dict[str, Any] = {}


def parse_min_tokens(raw: str | None) -> int:
    """``DGEMMA_FFN_OVERLAP_MIN_TOKENS``: unset -> 0 (always overlap); else a whole number >= 0."""
    val = (raw or "").strip()
    if not val:
        return 0
    if not val.isdigit():
        raise ValueError(f"{MIN_TOKENS_ENV}: {raw!r} is not a whole number of tokens")
    return int(val)


def source_hash(fn: Callable) -> str:
    """The hash :data:`KNOWN_FORWARDS` holds: sha256 of the function's source text."""
    return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()


def run_branches(
    mlp: Callable[[Any], Any],
    moe: Callable[[Any, Any], Any],
    x_mlp: Any,
    x_moe: Any,
    router_logits: Any,
    stream: Any | None,
) -> tuple[Any, Any]:
    """``(mlp(x_mlp), moe(x_moe, router_logits))``; with a side ``stream`` the MLP runs there while the MoE runs on
    the current stream, and the current stream waits for both before returning (so the caller, and a CUDA graph being
    captured, sees an ordinary op). Without one (CPU, or too few tokens), in order."""
    if stream is None:
        return mlp(x_mlp), moe(x_moe, router_logits)
    import torch

    main = torch.cuda.current_stream()
    stream.wait_stream(main)  # the side stream starts after the norms that made x_mlp
    with torch.cuda.stream(stream):
        mlp_out = mlp(x_mlp)
    moe_out = moe(x_moe, router_logits)
    main.wait_stream(stream)
    # x_mlp was made on the main stream and read on the side one; it is freed only after this join (the main stream
    # waits above), and mlp_out's memory came from the side stream's pool, read next on the main stream after it
    return mlp_out, moe_out


def op_functions() -> tuple[Callable, Callable]:
    """The op and its fake (shapes only, for torch.compile's tracing), with real (not stringified) annotations:
    the op's schema is inferred from them."""
    import torch

    def dgemma_ffn_overlap(x_mlp, x_moe, router_logits, key):  # noqa: ANN001, ANN202
        layer = _LAYERS[key]
        stream = _STATE.get("stream") if x_mlp.shape[0] >= _STATE.get("min_tokens", 0) else None
        return list(run_branches(layer.mlp, layer.moe, x_mlp, x_moe, router_logits, stream))

    def dgemma_ffn_overlap_fake(x_mlp, x_moe, router_logits, key):  # noqa: ANN001, ANN202
        return [torch.empty_like(x_mlp), torch.empty_like(x_moe)]

    ann = {"x_mlp": torch.Tensor, "x_moe": torch.Tensor, "router_logits": torch.Tensor, "key": str,
           "return": list[torch.Tensor]}  # fmt: skip
    for fn in (dgemma_ffn_overlap, dgemma_ffn_overlap_fake):
        fn.__annotations__ = dict(ann)
    return dgemma_ffn_overlap, dgemma_ffn_overlap_fake


def register_op() -> None:
    """Define ``torch.ops.vllm.dgemma_ffn_overlap`` once per process (vLLM's helper: schema from the signature)."""
    if _STATE.get("op"):
        return
    from vllm.utils.torch_utils import direct_register_custom_op

    op, fake = op_functions()
    direct_register_custom_op(OP_NAME, op, mutates_args=[], fake_impl=fake)
    _STATE["op"] = True


def build_layer_class(base: type) -> type:
    """A subclass of vLLM's ``Gemma4DecoderLayer`` whose forward sends the two feed-forward branches through the op.

    The forward is vLLM 0.26's, restated; only the lines between ``residual = hidden_states`` (after attention) and
    the branches' sum differ."""
    import torch

    class DGemmaOverlapDecoderLayer(base):
        dgemma_ffn_key: str = ""

        def forward(
            self,
            positions: torch.Tensor,
            hidden_states: torch.Tensor,
            residual: torch.Tensor | None,
            per_layer_input: torch.Tensor | None = None,
            **kwargs: Any,
        ) -> tuple[torch.Tensor, torch.Tensor | None]:
            if not self.enable_moe_block:
                return super().forward(positions, hidden_states, residual, per_layer_input, **kwargs)
            residual = hidden_states
            hidden_states = self.input_layernorm(residual)
            hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states, **kwargs)
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states = hidden_states + residual
            residual = hidden_states

            x_mlp = self.pre_feedforward_layernorm(hidden_states)
            x_moe = self.pre_feedforward_layernorm_2(residual)
            router_logits = self.router(residual)
            mlp_out, moe_out = torch.ops.vllm.dgemma_ffn_overlap(x_mlp, x_moe, router_logits, self.dgemma_ffn_key)
            hidden_states = self.post_feedforward_layernorm_1(mlp_out) + self.post_feedforward_layernorm_2(moe_out)

            hidden_states = self.post_feedforward_layernorm(hidden_states)
            hidden_states = hidden_states + residual
            if per_layer_input is not None and self.per_layer_input_gate is not None:
                gate = self.per_layer_input_gate(hidden_states)
                gate = torch.nn.functional.gelu(gate, approximate="tanh")
                per_layer_contribution = self.per_layer_projection(gate * per_layer_input)
                hidden_states = hidden_states + self.post_per_layer_input_norm(per_layer_contribution)
            hidden_states = hidden_states * self.layer_scalar
            return hidden_states, None

    return DGemmaOverlapDecoderLayer


def install(model: Any, environ: dict[str, str] | None = None) -> int:
    """Turn ``model``'s MoE decoder layers into the overlapping subclass; returns how many (0 when vLLM's layer
    forward is not one :data:`KNOWN_FORWARDS` names, or there is no CUDA)."""
    import torch
    from vllm.logger import init_logger
    from vllm.model_executor.models.gemma4 import Gemma4DecoderLayer

    log = init_logger(f"vllm.{__name__}")  # under "vllm": the engine process's only handlers
    env = os.environ if environ is None else environ
    if not torch.cuda.is_available():
        return 0
    digest = source_hash(Gemma4DecoderLayer.forward)
    if digest not in KNOWN_FORWARDS:
        log.warning("ffn_overlap off: this vLLM's Gemma4DecoderLayer.forward (sha256 %s) is not the one it restates",
                    digest[:12])  # fmt: skip
        return 0
    register_op()
    _STATE["min_tokens"] = parse_min_tokens(env.get(MIN_TOKENS_ENV))
    _STATE.setdefault("stream", torch.cuda.Stream())
    cls = _STATE.get("cls") or build_layer_class(Gemma4DecoderLayer)
    _STATE["cls"] = cls
    n = 0
    for layer in getattr(model.model, "layers", []):
        if type(layer) is Gemma4DecoderLayer and layer.enable_moe_block:
            key = layer.moe.experts.layer_name
            _LAYERS[key] = layer
            layer.__class__ = cls
            layer.dgemma_ffn_key = key
            n += 1
    log.info("ffn_overlap: %d layers run the dense MLP beside the MoE (min tokens %d)", n, _STATE["min_tokens"])
    return n
