"""PyTorch reference for one DiffusionGemma denoising step (the semantics every kernel must match).

It follows transformers' ``DiffusionGemmaGenerationMixin._denoising_step`` + ``EntropyBoundSampler``:

1. ``scaled = logits / T`` with the linear schedule ``T = t_min + (t_max - t_min) * cur_step / max_steps``
   (``cur_step`` counts down N..1), in float32;
2. ``argmax = argmax(scaled)`` (the draft), ``sample ~ softmax(scaled)``, ``entropy = H(softmax(scaled))``;
3. per request, sort entropies ascending and accept the shortest-entropy prefix whose entropy *before* each token
   sums to ``<= entropy_bound`` (``cumsum - sorted <= bound``);
4. ``next = where(accepted, sample, renoise)`` (transformers' accept-then-renoise collapses to this).

Two things transformers leaves open and we define:

* sampling is Gumbel-max on given uniform noise ``u``: ``argmax(scaled - log(-log u))`` — the same distribution as
  ``torch.multinomial(softmax(scaled))``, but reproducible bit for bit by a kernel fed the same ``u``;
* pinned positions (``pinned`` mask + ``pinned_tokens``) count as zero entropy (so they never use up the bound),
  are always accepted, and both the next canvas and the draft hold the pinned token there.

Ties in the entropy sort are broken by position (a stable sort) so that kernels can reproduce the order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(slots=True)
class StepOutput:
    """Per-row results of one denoising step over ``N`` canvas rows (all requests flattened)."""

    next_canvas: torch.Tensor  # (N,) int64: the canvas the next step denoises
    argmax: torch.Tensor  # (N,) int64: the draft (pinned tokens where pinned)
    sample: torch.Tensor  # (N,) int64: the Gumbel-max sample, before acceptance
    entropy: torch.Tensor  # (N,) float32: entropy of softmax(scaled), pins not zeroed
    accepted: torch.Tensor  # (N,) bool
    scaled_logits: torch.Tensor | None = None  # (N, V) logits / T in ``scaled_dtype`` (self-conditioning input)
    probs: torch.Tensor | None = None  # (N, V) softmax(logits / T) in ``probs_dtype`` (vLLM's soft-embedding input)


def linear_temperature(cur_step: int | torch.Tensor, max_steps: int, t_min: float, t_max: float):
    """transformers' LinearTemperatureScheduleLogitsProcessor: ``cur_step`` counts down from ``max_steps`` to 1."""
    return t_min + (t_max - t_min) * (cur_step / max_steps)


def segment_offsets(n_rows: int, segments: torch.Tensor | list[int] | None, device) -> torch.Tensor:
    """Request boundaries as int32 offsets ``[0, end_0, end_1, ..., N]`` (None = one request over all rows)."""
    if segments is None:
        return torch.tensor([0, n_rows], dtype=torch.int32, device=device)
    if torch.is_tensor(segments) and segments.device == torch.device(device) and segments.dtype == torch.int32:
        return segments  # trusted as given: validating a device tensor would stall the stream (a host sync)
    seg = torch.as_tensor(segments, dtype=torch.int32, device=device)
    if seg.ndim != 1 or seg.numel() < 2 or int(seg[0]) != 0 or int(seg[-1]) != n_rows:
        raise ValueError("segments must be offsets [0, ..., N] over the rows")
    if bool((seg[1:] < seg[:-1]).any()):
        raise ValueError("segments must be non-decreasing")
    return seg


def row_stats_reference(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    noise: torch.Tensor,
    softcap: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(scaled fp32, argmax, Gumbel-max sample, entropy) for each row of ``logits`` (N, V)."""
    x = logits.to(torch.float32)
    if softcap:
        x = torch.tanh(x / softcap) * softcap
    scaled = x / temperature.to(torch.float32)[:, None]
    argmax = torch.argmax(scaled, dim=-1)
    gumbel = -torch.log(-torch.log(noise.to(torch.float32)))
    sample = torch.argmax(scaled + gumbel, dim=-1)
    # the same call transformers' EntropyBoundSampler makes
    entropy = torch.distributions.Categorical(logits=scaled).entropy()
    return scaled, argmax, sample, entropy


def accept_reference(
    entropy: torch.Tensor,
    offsets: torch.Tensor,
    entropy_bound: torch.Tensor,
    pinned: torch.Tensor | None,
    widths: torch.Tensor | None = None,
) -> torch.Tensor:
    """Entropy-bound acceptance per request (rows ``offsets[b]:offsets[b+1]``); returns a bool mask (N,).

    Rows at or past ``widths[b]`` inside a request (a canvas narrower than the engine's) are never accepted.
    """
    e = entropy.to(torch.float32)
    if pinned is not None:
        e = torch.where(pinned, torch.zeros_like(e), e)
    accepted = torch.zeros(e.shape, dtype=torch.bool, device=e.device)
    for b in range(offsets.numel() - 1):
        lo, hi = int(offsets[b]), int(offsets[b + 1])
        if hi == lo:
            continue
        eb = e[lo:hi]
        w = hi - lo if widths is None else int(widths[b])
        eb = torch.where(torch.arange(hi - lo, device=e.device) < w, eb, torch.full_like(eb, float("inf")))
        sorted_e, order = torch.sort(eb, stable=True)
        cum = torch.cumsum(sorted_e, dim=-1)
        keep = ((cum - sorted_e) <= float(entropy_bound[b])) & torch.isfinite(sorted_e)
        accepted[lo:hi] = torch.zeros_like(keep).scatter(0, order, keep)
    if pinned is not None:
        accepted |= pinned
    return accepted


def denoise_step_reference(
    logits: torch.Tensor,
    temperature: torch.Tensor | float,
    *,
    noise: torch.Tensor,
    renoise_tokens: torch.Tensor,
    entropy_bound: torch.Tensor | float = 0.1,
    segments: torch.Tensor | list[int] | None = None,
    pinned: torch.Tensor | None = None,
    pinned_tokens: torch.Tensor | None = None,
    softcap: float | None = None,
    scaled_dtype: torch.dtype | None = None,
    probs_dtype: torch.dtype | None = None,
    widths: torch.Tensor | None = None,
) -> StepOutput:
    """One full step on flattened rows (N, V); see the module docstring for the semantics."""
    n, _ = logits.shape
    dev = logits.device
    temp = torch.as_tensor(temperature, dtype=torch.float32, device=dev).expand(n)
    offsets = segment_offsets(n, segments, dev)
    bound = torch.as_tensor(entropy_bound, dtype=torch.float32, device=dev).expand(offsets.numel() - 1)
    scaled, argmax, sample, entropy = row_stats_reference(logits, temp, noise, softcap)
    accepted = accept_reference(entropy, offsets, bound, pinned, widths)
    next_canvas = torch.where(accepted, sample, renoise_tokens.to(torch.int64))
    if pinned is not None:
        if pinned_tokens is None:
            raise ValueError("pinned needs pinned_tokens")
        pt = pinned_tokens.to(torch.int64)
        next_canvas = torch.where(pinned, pt, next_canvas)
        argmax = torch.where(pinned, pt, argmax)
    return StepOutput(
        next_canvas=next_canvas,
        argmax=argmax,
        sample=sample,
        entropy=entropy,
        accepted=accepted,
        scaled_logits=None if scaled_dtype is None else scaled.to(scaled_dtype),
        probs=None if probs_dtype is None else torch.softmax(scaled, dim=-1).to(probs_dtype),
    )
