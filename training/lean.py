"""DiffusionGemma's training forward over packed rows: many examples in one sequence, one attention mask.

transformers' ``DiffusionGemmaForBlockDiffusion`` runs an encoder over the prompt (causal, writing a KV cache) and
then a decoder over the canvas (bidirectional, reading that cache); encoder and decoder share every weight, and the
decoder adds the self-conditioning block on the canvas embeddings. Because a prompt token never attends to a canvas
token, the two passes are one pass over ``prompt + canvas`` with this mask:

* a prompt token attends to the earlier tokens of its own prompt (the encoder's causal attention);
* a canvas token attends to its whole prompt and to every token of its own canvas (the decoder's attention).

A packed row holds examples back to back, each ``prompt, canvas_1, ..., canvas_K`` (K noised copies of one target
canvas at the canvas positions after the prompt, each seeing only itself and the prompt), so nothing is padded but
the row's tail, and one forward trains the encoder's next-token loss on every prompt and the decoder's denoising loss
on every canvas. The layers are transformers' own modules, called piece by piece (norms, projections, rotary
embedding, router), so the weights are the checkpoint's and ``save_pretrained`` writes a checkpoint the reference
and the server load unchanged; ``tests/training/test_lean.py`` checks the logits against the reference forward.

Sliding-window layers see the whole example as long as an example is shorter than the window (the trainer keeps
``prompt + canvas <= sliding_window``), so one mask serves every layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

PAD_DOC = -1


@dataclass
class PackedBatch:
    """One step's rows, all ``[B, S]`` on one device.

    ``doc``: example index within the row (``PAD_DOC`` for the row's tail); ``canvas``: canvas id, unique within
    the row, ``-1`` for prompt tokens; ``pos``: the position id each token has in its own example; ``ids``: the
    model's input (noised canvases); ``target``: the clean canvas token (canvas positions) or the next prompt token
    (prompt positions with ``ar_w > 0``); ``canvas_w`` / ``ar_w``: loss weights; ``sc_on``: canvas tokens whose
    example trains with self-conditioning.
    """

    ids: torch.Tensor
    pos: torch.Tensor
    doc: torch.Tensor
    canvas: torch.Tensor
    target: torch.Tensor
    canvas_w: torch.Tensor
    ar_w: torch.Tensor
    sc_on: torch.Tensor

    def to(self, device: Any, non_blocking: bool = True) -> PackedBatch:
        return PackedBatch(**{k: v.to(device, non_blocking=non_blocking) for k, v in self.__dict__.items()})


def dense_mask(doc: torch.Tensor, canvas: torch.Tensor) -> torch.Tensor:
    """The packed mask as a ``[B, 1, S, S]`` boolean tensor (for SDPA on CPU and for tests)."""
    S = doc.shape[1]
    q = torch.arange(S, device=doc.device)
    same = doc[:, :, None] == doc[:, None, :]
    k_prompt = (canvas < 0)[:, None, :]
    q_prompt = (canvas < 0)[:, :, None]
    causal = (q[:, None] >= q[None, :])[None]
    own_canvas = (canvas[:, :, None] == canvas[:, None, :]) & ~q_prompt
    eye = (q[:, None] == q[None, :])[None]
    return ((same & k_prompt & (causal | ~q_prompt)) | (same & own_canvas) | eye)[:, None]


def flex_block_mask(doc: torch.Tensor, canvas: torch.Tensor) -> Any:
    """The packed mask as a flex-attention block mask (GPU training)."""
    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b: Any, h: Any, q: Any, k: Any) -> Any:
        same = doc[b, q] == doc[b, k]
        k_prompt = canvas[b, k] < 0
        q_prompt = canvas[b, q] < 0
        own_canvas = (canvas[b, q] == canvas[b, k]) & ~q_prompt
        return (same & k_prompt & ((k <= q) | ~q_prompt)) | (same & own_canvas) | (q == k)

    B, S = doc.shape
    return create_block_mask(mask_mod, B, None, S, S, device=doc.device, _compile=True)


def _rms(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """transformers' DiffusionGemmaRMSNorm: fp32 statistics, ``x * weight`` (the weight is the scale itself)."""
    h = x.float()
    h = h * torch.pow(h.pow(2).mean(-1, keepdim=True) + eps, -0.5)
    if weight is not None:
        h = h * weight.float()
    return h.type_as(x)


class PackedDiffusionGemma(nn.Module):
    """The training forward of a ``DiffusionGemmaForBlockDiffusion`` over packed rows (see the module docstring).

    Holds the reference model; parameters are the reference model's own (the decoder's, which the encoder's are
    tied to), so an optimizer over ``self.parameters()`` trains the checkpoint.
    """

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model
        self.dec = model.model.decoder
        tc = model.config.text_config
        self.tc = tc
        self.eps = tc.rms_norm_eps
        self.softcap = tc.final_logit_softcapping
        self.layer_types = list(tc.layer_types)
        self._layer: Any = _layer_forward
        self._head: Any = _head_loss

    def embed(self, ids: torch.Tensor, canvas: torch.Tensor, sc_soft: torch.Tensor | None) -> torch.Tensor:
        """Prompt tokens: the scaled embedding (encoder). Canvas tokens: the decoder's self-conditioning block on it,
        fed the soft embedding of the previous pass's logits (zeros where the example has none)."""
        dec = self.dec
        emb = dec.embed_tokens(ids)
        soft = torch.zeros_like(emb) if sc_soft is None else sc_soft.to(emb.dtype)
        sc = dec.self_conditioning
        normed = _rms(soft, sc.pre_norm.weight, self.eps)
        sig = sc.down_proj(sc.act_fn(sc.gate_proj(normed)) * sc.up_proj(normed))
        on_canvas = _rms(emb + sig, None, self.eps)
        return torch.where((canvas >= 0)[..., None], on_canvas, emb)

    def soft_embedding(self, logits: torch.Tensor) -> torch.Tensor:
        """The decoder's soft embedding of previous logits: softmax over the vocabulary times the scaled table."""
        w = self.dec.embed_tokens.weight
        probs = logits.softmax(dim=-1, dtype=torch.float32).to(w.dtype)
        return (probs @ w) * self.dec.embed_tokens.embed_scale.to(w.dtype)

    def compile(self) -> None:  # type: ignore[override]
        """Compile one layer (a graph per layer kind, shared by the layers of that kind: quick to compile) and the
        head; the Python loop over layers stays eager."""
        import torch._dynamo

        # one graph per layer kind; the limits are per function, and every layer is a call of it
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 4 * len(self.layer_types))
        self._layer = torch.compile(_layer_forward, dynamic=False)
        self._head = torch.compile(_head_loss, dynamic=False)

    def hidden(self, batch: PackedBatch, mask: Any, sc_soft: torch.Tensor | None = None) -> torch.Tensor:
        dec = self.dec
        x = self.embed(batch.ids, batch.canvas, sc_soft)
        cos_sin = {t: dec.rotary_emb(x, batch.pos, t) for t in set(self.layer_types)}
        for i, layer in enumerate(dec.layers):
            cos, sin = cos_sin[self.layer_types[i]]
            x = self._layer(layer, x, cos, sin, mask, self.eps, self.tc.top_k_experts)
        return _rms(x, dec.norm.weight, self.eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.model.lm_head(hidden).float()
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def loss(
        self, batch: PackedBatch, mask: Any, *, self_conditioning: bool = True, sc_temperature: Any = 1.0
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Denoising loss over the canvases plus the weighted next-token loss over the prompts.

        With ``self_conditioning`` a first pass without gradients gives every canvas its logits; canvases with
        ``sc_on`` are then trained on their soft embedding (divided by ``sc_temperature``, as the sampler feeds its
        previous logits back), the others on zeros, as at the first denoising step.
        """
        sc_soft = None
        if self_conditioning:
            with torch.no_grad():
                first = self.logits(self.hidden(batch, mask)) / sc_temperature
                sc_soft = self.soft_embedding(first) * batch.sc_on[..., None].to(first.dtype)
        h = self.hidden(batch, mask, sc_soft)
        canvas_loss, ar_loss = self._head(h, self.model.lm_head.weight, self.softcap, batch.target, batch.canvas_w,
                                          batch.ar_w)  # fmt: skip
        return canvas_loss + ar_loss, {"canvas": canvas_loss.detach(), "ar": ar_loss.detach()}


def _attention(layer: Any, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: Any, eps: float) -> torch.Tensor:
    from transformers.models.diffusion_gemma.modeling_diffusion_gemma import apply_rotary_pos_emb

    a = layer.self_attn
    B, S, _ = x.shape
    hd = a.head_dim
    q = a.q_proj(x).view(B, S, -1, hd)
    q = apply_rotary_pos_emb(_rms(q, a.q_norm.weight, eps), cos, sin, unsqueeze_dim=2).transpose(1, 2)
    k_raw = a.k_proj(x).view(B, S, -1, hd)
    v = a.v_proj(x).view(B, S, -1, hd) if a.v_proj is not None else k_raw  # full-attention layers: K = V
    k = apply_rotary_pos_emb(_rms(k_raw, a.k_norm.weight, eps), cos, sin, unsqueeze_dim=2).transpose(1, 2)
    v = _rms(v, None, eps).transpose(1, 2)
    if isinstance(mask, torch.Tensor):
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
    else:
        from torch.nn.attention.flex_attention import flex_attention

        o = flex_attention(q, k, v, block_mask=mask, scale=1.0, enable_gqa=True)
    return a.o_proj(o.transpose(1, 2).reshape(B, S, -1))


def _moe(layer: Any, residual: torch.Tensor, eps: float, top_k: int) -> torch.Tensor:
    """Router and experts as the reference computes them; every expert runs on every token (few, small experts:
    dense batched matmuls beat gathering tokens per expert) and unrouted experts get weight 0."""
    r = layer.router
    flat = residual.reshape(-1, residual.shape[-1])
    h = _rms(flat, None, eps) * r.scale * r.scalar_root_size
    probs = F.softmax(r.proj(h), dim=-1, dtype=torch.float32)
    top_w, top_i = torch.topk(probs, k=top_k, dim=-1)
    top_w = top_w / top_w.sum(dim=-1, keepdim=True)
    top_w = top_w * r.per_expert_scale[top_i]
    dense_w = torch.zeros_like(probs).scatter(1, top_i, top_w)  # [T, E]
    ex = layer.experts
    x = _rms(flat, layer.pre_feedforward_layernorm_2.weight, eps)
    gu = torch.einsum("td,eod->teo", x, ex.gate_up_proj.to(x.dtype))
    gate, up = gu.chunk(2, dim=-1)
    act = ex.act_fn(gate) * up
    out = torch.einsum("tei,edi->ted", act, ex.down_proj.to(x.dtype))
    out = (out * dense_w.to(out.dtype)[..., None]).sum(1)
    return out.reshape(residual.shape)


def _layer_forward(
    layer: Any, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: Any, eps: float, top_k: int
) -> torch.Tensor:
    """One decoder layer as transformers computes it: sandwich-normed attention, then the dense MLP and the MoE side
    by side on the same residual, normed and added, times the layer scalar."""
    res = x
    h = _rms(x, layer.input_layernorm.weight, eps)
    h = _attention(layer, h, cos, sin, mask, eps)
    x = res + _rms(h, layer.post_attention_layernorm.weight, eps)
    res = x
    h = _rms(x, layer.pre_feedforward_layernorm.weight, eps)
    h1 = _rms(layer.mlp(h), layer.post_feedforward_layernorm_1.weight, eps)
    h2 = _rms(_moe(layer, res, eps, top_k), layer.post_feedforward_layernorm_2.weight, eps)
    x = res + _rms(h1 + h2, layer.post_feedforward_layernorm.weight, eps)
    return x * layer.layer_scalar.to(x.dtype)


def _head_loss(
    h: torch.Tensor, w: torch.Tensor, softcap: float | None, target: torch.Tensor, cw: torch.Tensor, aw: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft-capped logits and the two losses: denoising (canvas positions) and next-token (prompt positions)."""
    logits = F.linear(h, w).float()
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    ce = F.cross_entropy(logits.view(-1, logits.shape[-1]), target.reshape(-1), reduction="none").view(target.shape)
    canvas_loss = (ce * cw).sum() / cw.sum().clamp(min=1)
    ar_loss = (ce * aw).sum() / (aw > 0).sum().clamp(min=1)
    return canvas_loss, ar_loss


def model_flops_per_token(config: Any, context: float) -> dict[str, float]:
    """Forward FLOPs per token of the active weights (router-selected experts only) and of attention at an average
    ``context`` keys per query; training (forward + backward) is 3x, a self-conditioning pass adds 1x."""
    tc = config.text_config
    d, L = tc.hidden_size, tc.num_hidden_layers
    per_layer = 0
    attn = 0.0
    for t in tc.layer_types:
        lc = tc.per_layer_config[t]
        hd, kv = lc.head_dim, lc.num_key_value_heads
        qo = 2 * d * tc.num_attention_heads * hd
        kvp = d * kv * hd * (2 if t == "sliding_attention" else 1)
        per_layer += qo + kvp
        attn += 2 * 2 * context * tc.num_attention_heads * hd  # QK^T and PV
    per_layer += L * 3 * d * tc.intermediate_size
    per_layer += L * tc.top_k_experts * 3 * d * tc.moe_intermediate_size + L * d * tc.num_experts
    sc = 3 * d * tc.intermediate_size
    head = d * tc.vocab_size
    return {"matmul": 2.0 * (per_layer + sc + head), "attention": attn}


def count_params(model: nn.Module) -> int:
    seen: set[int] = set()
    n = 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    return n


def peak_bf16_flops(device_name: str) -> float:
    """Dense bf16 peak of the GPUs this project trains on (the vendors' datasheet figures, no sparsity)."""
    name = device_name.upper()
    if "H100" in name or "H200" in name:
        return 989e12
    if "A100" in name:
        return 312e12
    return math.nan
