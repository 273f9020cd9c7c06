"""The per-request bookkeeping around a denoising step, as two Triton launches instead of ~110 small PyTorch ops.

Before the step, :func:`step_inputs` gathers each request's temperature, noise seeds, pins, width, step cap and
entropy bound into per-row inputs for the row kernels (~30 ops in PyTorch).

After the row and acceptance kernels (:mod:`.denoise`), vLLM 0.26's DiffusionGemma sampler updates its request
state: the step counter, the next canvas (renoised on a commit), the ring of recent argmax canvases and its length,
the argmax canvas, what the step emits (``sampled`` / ``num_sampled``), the confidence flag, convergence (stable
and confident, or the step cap) and the phase flag. In PyTorch that is about 80 launches (counted in the code) of a
few microseconds each; here it is one program per decoding request.

:func:`canvas_state_update_reference` is the PyTorch form (the plugin's code before this kernel, itself vLLM 0.26's
``_diffusion_decode_step`` phases 5-6 with our per-request width, step cap and pins); :func:`canvas_state_update`
runs the kernel where Triton is usable (CUDA, or the interpreter) and the reference elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .denoise import HAVE_TRITON, kernels_usable

if HAVE_TRITON:
    import triton
    import triton.language as tl


@dataclass
class StateUpdate:
    """Per decoding request (``nd``): what the caller still needs after the update."""

    new_step: torch.Tensor  # (nd,) int32: the step counter after this step (0 after a commit)
    keep_self_conditioning: torch.Tensor  # (nd,) bool: denoised and denoises again next (keep its soft embedding)
    final: torch.Tensor  # (nd,) bool: denoised and converged (the next step commits this argmax canvas)


def canvas_state_update_reference(
    states: Any,
    *,
    slots: torch.Tensor,
    decode_idx: torch.Tensor,
    argmax: torch.Tensor,
    next_canvas: torch.Tensor,
    entropy: torch.Tensor,
    renoise: torch.Tensor,
    width: torch.Tensor,
    cap: torch.Tensor,
    emit: torch.Tensor,
    pin_active: torch.Tensor,
    sampled: torch.Tensor,
    num_sampled: torch.Tensor,
    confidence_threshold: float,
) -> StateUpdate:
    """Update ``states`` (vLLM 0.26's DiffusionGemma request states: ``canvas``, ``argmax_canvas``, ``step``,
    ``is_encoder_phase``, ``confident``, ``accepted_canvas_history``, ``accepted_canvas_history_len``,
    ``stability_threshold``) in place for the requests in state rows ``slots`` (their batch rows: ``decode_idx``),
    and write ``sampled`` / ``num_sampled`` at ``decode_idx``. Per request: ``argmax``, ``next_canvas``, ``entropy``
    and ``renoise`` are ``(nd, CL)``; ``width`` (canvas width), ``cap`` (step cap, float) and ``emit`` (tokens a
    commit emits) are ``(nd,)``. ``pin_active`` (by state row) is cleared where the step committed."""
    nd, cl = argmax.shape
    is_commit = states.is_encoder_phase[slots]
    is_denoise = ~is_commit
    pos = torch.arange(cl, device=argmax.device)
    in_width = pos[None, :] < width[:, None]
    mean_entropy = (entropy * in_width).sum(-1) / in_width.sum(-1)
    states.confident[slots] = mean_entropy < confidence_threshold
    step_f = states.step[slots].float()
    new_step = torch.where(is_denoise, (step_f + 1).to(states.step.dtype), states.step.new_zeros(nd))
    states.step[slots] = new_step
    states.canvas[slots] = torch.where(is_commit[:, None], renoise, next_canvas)
    # stability over the request's own width only (positions past it are never emitted)
    hist_tokens = torch.where(in_width, argmax, 0)
    st_n = states.stability_threshold
    hist_len = states.accepted_canvas_history_len[slots]
    write_pos = hist_len % st_n
    for i in range(st_n):
        here = ((write_pos == i) & is_denoise)[:, None]
        states.accepted_canvas_history[slots, i] = torch.where(
            here, hist_tokens, states.accepted_canvas_history[slots, i]
        )
    states.argmax_canvas[slots] = torch.where(is_denoise[:, None], argmax, states.argmax_canvas[slots])
    new_hist_len = torch.where(is_denoise, hist_len + 1, hist_len.new_zeros(nd))
    states.accepted_canvas_history_len[slots] = new_hist_len
    sampled[decode_idx] = states.argmax_canvas[slots].to(sampled.dtype) * is_commit[:, None].to(sampled.dtype)
    num_sampled[decode_idx] = is_commit.to(num_sampled.dtype) * emit.to(num_sampled.dtype)
    ref = states.accepted_canvas_history[slots, 0]
    mismatch = torch.zeros(nd, device=argmax.device, dtype=torch.int32)
    for h in range(1, st_n):
        mismatch = mismatch + (ref != states.accepted_canvas_history[slots, h]).sum(dim=-1).int()
    converged = ((mismatch == 0) & states.confident[slots] & (new_hist_len >= st_n)) | (new_step.float() >= cap)
    states.is_encoder_phase[slots] = torch.where(is_commit, is_commit.new_zeros(nd), converged)
    pin_active[slots] &= ~is_commit
    keep = is_denoise & ~states.is_encoder_phase[slots]
    newly = converged & is_denoise
    states.canvas[slots] = torch.where(newly[:, None], states.argmax_canvas[slots], states.canvas[slots])
    return StateUpdate(new_step=new_step.to(torch.int32), keep_self_conditioning=keep, final=newly)


if HAVE_TRITON:

    @triton.jit
    def _state_kernel(
        slots_ptr,
        didx_ptr,
        argmax_ptr,
        next_ptr,
        entropy_ptr,
        renoise_ptr,
        stride_in,  # row stride of argmax / next_canvas / entropy / renoise (all (nd, CL), contiguous)
        width_ptr,
        cap_ptr,
        emit_ptr,
        canvas_ptr,
        stride_canvas,
        argmax_canvas_ptr,
        stride_amc,
        step_ptr,
        phase_ptr,
        confident_ptr,
        hist_ptr,
        stride_h0,
        stride_h1,
        hist_len_ptr,
        pin_active_ptr,
        sampled_ptr,
        stride_sampled,
        num_sampled_ptr,
        new_step_out_ptr,
        keep_out_ptr,
        final_out_ptr,
        threshold,
        CL: tl.constexpr,
        BLOCK: tl.constexpr,
        ST: tl.constexpr,
    ):
        r = tl.program_id(0)
        slot = tl.load(slots_ptr + r).to(tl.int64)
        d = tl.load(didx_ptr + r).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        m = offs < CL
        w = tl.load(width_ptr + r)
        inw = m & (offs < w)
        ent = tl.load(entropy_ptr + r * stride_in + offs, mask=inw, other=0.0)
        mean = tl.sum(ent, 0) / tl.sum(inw.to(tl.float32), 0)
        confident = mean < threshold
        tl.store(confident_ptr + slot, confident)
        commit = tl.load(phase_ptr + slot) != 0
        denoise = commit == 0
        step = tl.load(step_ptr + slot)
        new_step = tl.where(denoise, step + 1, 0)
        tl.store(step_ptr + slot, new_step)
        am = tl.load(argmax_ptr + r * stride_in + offs, mask=m, other=0)
        nxt = tl.load(next_ptr + r * stride_in + offs, mask=m, other=0)
        rn = tl.load(renoise_ptr + r * stride_in + offs, mask=m, other=0)
        canvas = tl.where(commit, rn, nxt)
        hist_tokens = tl.where(inw, am, 0)
        hl = tl.load(hist_len_ptr + slot)
        wp = hl % ST
        hrow = hist_ptr + slot * stride_h0 + offs
        ref = tl.where(denoise & (wp == 0), hist_tokens, tl.load(hrow, mask=m, other=0))
        tl.store(hrow, ref, mask=m)
        mismatch = tl.sum(tl.zeros([BLOCK], tl.int32), 0)
        for h in tl.static_range(1, ST):
            row = tl.where(denoise & (wp == h), hist_tokens, tl.load(hrow + h * stride_h1, mask=m, other=0))
            tl.store(hrow + h * stride_h1, row, mask=m)
            mismatch += tl.sum((m & (row != ref)).to(tl.int32), 0)
        amc_row = argmax_canvas_ptr + slot * stride_amc + offs
        amc = tl.where(denoise, am, tl.load(amc_row, mask=m, other=0))
        tl.store(amc_row, amc, mask=m)
        new_hl = tl.where(denoise, hl + 1, 0)
        tl.store(hist_len_ptr + slot, new_hl)
        tl.store(sampled_ptr + d * stride_sampled + offs, tl.where(commit, amc, 0), mask=m)
        tl.store(num_sampled_ptr + d, tl.where(commit, tl.load(emit_ptr + r), 0))
        cap = tl.load(cap_ptr + r)
        converged = ((mismatch == 0) & confident & (new_hl >= ST)) | (new_step.to(tl.float32) >= cap)
        phase = converged & denoise
        tl.store(phase_ptr + slot, phase)
        pin = tl.load(pin_active_ptr + slot) != 0
        tl.store(pin_active_ptr + slot, pin & denoise)
        tl.store(canvas_ptr + slot * stride_canvas + offs, tl.where(phase, amc, canvas), mask=m)
        tl.store(new_step_out_ptr + r, new_step.to(tl.int32))
        tl.store(keep_out_ptr + r, denoise & (phase == 0))
        tl.store(final_out_ptr + r, phase)


@dataclass
class StepInputs:
    """Per canvas row (``nd * CL``, request-major) and per request (``nd``): what the row kernels take."""

    temperature: torch.Tensor  # (nd * CL,) float32: the linear schedule at each request's step, >= 1e-10
    seed: torch.Tensor  # (nd * CL,) int32: per-row noise seeds (request seed, step, position)
    pinned: torch.Tensor  # (nd * CL,) bool: a pinned position of a request whose pins are active
    pinned_tokens: torch.Tensor  # (nd * CL,) int64
    width: torch.Tensor  # (nd,) int64: canvas width
    cap: torch.Tensor  # (nd,) float32: step cap
    bound: torch.Tensor  # (nd,) float32: entropy bound


def mix_seed(seed: Any, step: Any, pos: Any) -> Any:
    """Per-(request seed, step, position) noise seed in int31 (works on ints and int64 tensors)."""
    return (seed * 1_000_003 + step * 7_919 + pos * 104_729 + 12_345) % 2_147_483_647


def step_inputs_reference(
    *,
    slots: torch.Tensor,
    base_seed: torch.Tensor,
    step: torch.Tensor,
    cap: torch.Tensor,
    t_min: torch.Tensor,
    t_max: torch.Tensor,
    bound: torch.Tensor,
    width: torch.Tensor,
    pin_mask: torch.Tensor,
    pin_tokens: torch.Tensor,
    pin_active: torch.Tensor,
) -> StepInputs:
    """Gather the step's inputs for the requests in state rows ``slots`` (``base_seed``: one int64 per request, below
    2^31). Per state row: ``step`` (int), ``cap`` / ``t_min`` / ``t_max`` / ``bound`` (float32), ``width`` (int64),
    ``pin_active`` (bool); ``pin_mask`` / ``pin_tokens`` are (rows, CL). The temperature follows transformers'
    linear schedule on the remaining steps (``t_min + (t_max - t_min) * remaining / cap``, remaining >= 1)."""
    cl = pin_mask.shape[1]
    step_f = step[slots].float()
    cap_r = cap[slots]
    remaining = (cap_r - step_f).clamp(min=1.0)
    tmin, tmax = t_min[slots], t_max[slots]
    temp = (tmin + (tmax - tmin) * (remaining / cap_r)).clamp(min=1e-10)
    pos = torch.arange(cl, device=slots.device, dtype=torch.int64)
    seeds = mix_seed(base_seed.to(torch.int64)[:, None], step[slots].to(torch.int64)[:, None], pos[None, :])
    return StepInputs(
        temperature=temp.repeat_interleave(cl),
        seed=seeds.reshape(-1).to(torch.int32),
        pinned=(pin_mask[slots] & pin_active[slots, None]).reshape(-1),
        pinned_tokens=pin_tokens[slots].reshape(-1),
        width=width[slots],
        cap=cap_r,
        bound=bound[slots],
    )


if HAVE_TRITON:

    @triton.jit
    def _inputs_kernel(
        slots_ptr,
        base_ptr,
        step_ptr,
        cap_ptr,
        tmin_ptr,
        tmax_ptr,
        bound_ptr,
        width_ptr,
        pin_mask_ptr,
        pin_tok_ptr,
        stride_pin,
        pin_active_ptr,
        temp_out,
        seed_out,
        pinned_out,
        ptok_out,
        width_out,
        cap_out,
        bound_out,
        CL: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        r = tl.program_id(0)
        slot = tl.load(slots_ptr + r).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        m = offs < CL
        step = tl.load(step_ptr + slot)
        cap = tl.load(cap_ptr + slot)
        remaining = tl.maximum(cap - step.to(tl.float32), 1.0)
        tmin = tl.load(tmin_ptr + slot)
        tmax = tl.load(tmax_ptr + slot)
        temp = tl.maximum(tmin + (tmax - tmin) * (remaining / cap), 1e-10)
        base = tl.load(base_ptr + r).to(tl.int64)
        seed = (base * 1_000_003 + step.to(tl.int64) * 7_919 + offs.to(tl.int64) * 104_729 + 12_345) % 2_147_483_647
        out = r * CL + offs
        tl.store(temp_out + out, tl.zeros([BLOCK], tl.float32) + temp, mask=m)
        tl.store(seed_out + out, seed.to(tl.int32), mask=m)
        active = tl.load(pin_active_ptr + slot) != 0
        pin = tl.load(pin_mask_ptr + slot * stride_pin + offs, mask=m, other=0) != 0
        tl.store(pinned_out + out, pin & active, mask=m)
        tl.store(ptok_out + out, tl.load(pin_tok_ptr + slot * stride_pin + offs, mask=m, other=0), mask=m)
        tl.store(width_out + r, tl.load(width_ptr + slot))
        tl.store(cap_out + r, cap)
        tl.store(bound_out + r, tl.load(bound_ptr + slot))


def step_inputs(*, impl: str = "auto", **kw: Any) -> StepInputs:
    """:func:`step_inputs_reference`'s gathers in one launch where Triton is usable (``impl`` as below)."""
    slots = kw["slots"]
    if impl == "auto":
        impl = "triton" if kernels_usable(slots.device) else "torch"
    if impl == "torch":
        return step_inputs_reference(**kw)
    if impl != "triton":
        raise ValueError(f"impl must be 'triton', 'torch' or 'auto' (got {impl!r})")
    nd, dev = slots.shape[0], slots.device
    pin_mask, pin_tok = kw["pin_mask"], kw["pin_tokens"]
    cl = pin_mask.shape[1]
    if pin_mask.stride() != pin_tok.stride() or pin_mask.stride(1) != 1:
        raise ValueError("pin_mask and pin_tokens must be (rows, CL) with the same unit-stride layout")
    out = StepInputs(
        temperature=torch.empty(nd * cl, dtype=torch.float32, device=dev),
        seed=torch.empty(nd * cl, dtype=torch.int32, device=dev),
        pinned=torch.empty(nd * cl, dtype=torch.bool, device=dev),
        pinned_tokens=torch.empty(nd * cl, dtype=pin_tok.dtype, device=dev),
        width=torch.empty(nd, dtype=kw["width"].dtype, device=dev),
        cap=torch.empty(nd, dtype=torch.float32, device=dev),
        bound=torch.empty(nd, dtype=torch.float32, device=dev),
    )
    if nd:
        _inputs_kernel[(nd,)](
            slots, kw["base_seed"], kw["step"], kw["cap"], kw["t_min"], kw["t_max"], kw["bound"], kw["width"],
            pin_mask, pin_tok, pin_mask.stride(0), kw["pin_active"],
            out.temperature, out.seed, out.pinned, out.pinned_tokens, out.width, out.cap, out.bound,
            CL=cl, BLOCK=triton.next_power_of_2(cl),
        )  # fmt: skip
    return out


def canvas_state_update(states: Any, *, impl: str = "auto", **kw: Any) -> StateUpdate:
    """:func:`canvas_state_update_reference`'s update; ``impl``: ``"triton"``, ``"torch"`` or ``"auto"`` (the kernel
    where Triton is usable on the states' device)."""
    argmax = kw["argmax"]
    if impl == "auto":
        impl = "triton" if kernels_usable(argmax.device) else "torch"
    if impl == "torch":
        return canvas_state_update_reference(states, **kw)
    if impl != "triton":
        raise ValueError(f"impl must be 'triton', 'torch' or 'auto' (got {impl!r})")
    nd, cl = argmax.shape
    dev = argmax.device
    hist = states.accepted_canvas_history
    ins = [kw[k].contiguous() for k in ("argmax", "next_canvas", "entropy", "renoise")]
    if len({t.stride(0) for t in ins}) != 1 or any(t.shape != (nd, cl) for t in ins):
        raise ValueError("argmax, next_canvas, entropy and renoise must all be (nd, CL)")
    for name, t in (("canvas", states.canvas), ("argmax_canvas", states.argmax_canvas), ("history", hist),
                    ("sampled", kw["sampled"])):  # fmt: skip
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must have unit stride along the canvas")
    new_step = torch.empty(nd, dtype=torch.int32, device=dev)
    keep = torch.empty(nd, dtype=torch.bool, device=dev)
    final = torch.empty(nd, dtype=torch.bool, device=dev)
    if nd:
        _state_kernel[(nd,)](
            kw["slots"], kw["decode_idx"], *ins, ins[0].stride(0),
            kw["width"], kw["cap"], kw["emit"],
            states.canvas, states.canvas.stride(0), states.argmax_canvas, states.argmax_canvas.stride(0),
            states.step, states.is_encoder_phase, states.confident, hist, hist.stride(0), hist.stride(1),
            states.accepted_canvas_history_len, kw["pin_active"], kw["sampled"], kw["sampled"].stride(0),
            kw["num_sampled"], new_step, keep, final, float(kw["confidence_threshold"]),
            CL=cl, BLOCK=triton.next_power_of_2(cl), ST=int(states.stability_threshold),
        )  # fmt: skip
    return StateUpdate(new_step=new_step, keep_self_conditioning=keep, final=final)
