"""Random request states for the request-state kernel's tests (CPU interpreter and GPU): no triton import here, so
the GPU test can use them without switching the process to interpreter mode."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import torch

V = 97
FIELDS = ("canvas", "argmax_canvas", "step", "is_encoder_phase", "confident", "accepted_canvas_history",
          "accepted_canvas_history_len")  # fmt: skip


def _states(n: int, cl: int, st: int, g: torch.Generator) -> SimpleNamespace:
    return SimpleNamespace(
        stability_threshold=st,
        canvas=torch.randint(0, V, (n, cl), generator=g),
        argmax_canvas=torch.randint(0, V, (n, cl), generator=g),
        step=torch.randint(0, 12, (n,), generator=g, dtype=torch.int32),
        is_encoder_phase=torch.rand(n, generator=g) < 0.3,
        confident=torch.rand(n, generator=g) < 0.5,
        accepted_canvas_history=torch.randint(0, 3, (n, st, cl), generator=g),
        accepted_canvas_history_len=torch.randint(0, 2 * st + 1, (n,), generator=g, dtype=torch.int32),
    )


def make_case(n: int, nd: int, cl: int, st: int, seed: int, device: str = "cpu") -> tuple[SimpleNamespace, dict]:
    g = torch.Generator().manual_seed(seed)
    states = _states(n, cl, st, g)
    slots = torch.randperm(n, generator=g)[:nd]
    argmax = torch.randint(0, 3, (nd, cl), generator=g)  # few values: stable histories happen
    # some requests converge by stability: their whole ring already holds this step's argmax (within the width)
    width = torch.randint(1, cl + 1, (nd,), generator=g)
    width[0] = cl
    for i in range(0, nd, 2):
        w = int(width[i])
        states.accepted_canvas_history[slots[i], :, :w] = argmax[i, :w]
        states.accepted_canvas_history[slots[i], :, w:] = 0
        if i % 4 == 0:  # the ring fills with this step: stable only if ">= ST" counts this step
            states.accepted_canvas_history_len[slots[i]] = st - 1
    entropy = torch.rand(nd, cl, generator=g) * 0.2
    entropy[1::3] += 2.0  # not confident
    kw = dict(
        slots=slots,
        decode_idx=torch.randperm(nd + 2, generator=g)[:nd],
        argmax=argmax,
        next_canvas=torch.randint(0, V, (nd, cl), generator=g),
        entropy=entropy,
        renoise=torch.randint(0, V, (nd, cl), generator=g),
        width=width,
        cap=torch.randint(4, 14, (nd,), generator=g).float(),
        emit=torch.minimum(width, torch.randint(1, cl + 1, (nd,), generator=g)),
        pin_active=torch.rand(n, generator=g) < 0.5,
        sampled=torch.full((nd + 2, cl), -1, dtype=torch.int32),
        num_sampled=torch.full((nd + 2,), -1, dtype=torch.int32),
        confidence_threshold=0.15,
    )
    if device != "cpu":
        states = SimpleNamespace(**{k: v.to(device) if torch.is_tensor(v) else v for k, v in vars(states).items()})
        kw = {k: v.to(device) if torch.is_tensor(v) else v for k, v in kw.items()}
    return states, kw


def make_inputs_case(n: int, nd: int, cl: int, seed: int, device: str = "cpu") -> dict:
    """Arguments of ``step_inputs``: state rows with their own steps, caps, temperatures, bounds, widths and pins."""
    g = torch.Generator().manual_seed(seed)
    kw = dict(
        slots=torch.randperm(n, generator=g)[:nd],
        base_seed=torch.randint(0, 2**31 - 1, (nd,), generator=g),
        step=torch.randint(0, 20, (n,), generator=g, dtype=torch.int32),
        cap=torch.randint(4, 24, (n,), generator=g).float(),
        t_min=torch.rand(n, generator=g) * 0.3,
        t_max=torch.rand(n, generator=g) + 0.5,
        bound=torch.rand(n, generator=g),
        width=torch.randint(1, cl + 1, (n,), generator=g),
        pin_mask=torch.rand(n, cl, generator=g) < 0.3,
        pin_tokens=torch.randint(0, V, (n, cl), generator=g),
        pin_active=torch.rand(n, generator=g) < 0.6,
    )
    kw["t_min"][0] = kw["t_max"][0] = 0.0  # greedy: the temperature's floor
    return {k: v.to(device) for k, v in kw.items()}


def check_update_against_reference(states: SimpleNamespace, kw: dict) -> None:
    """Run ``canvas_state_update`` as the kernel on ``states`` / ``kw`` and as PyTorch on copies: every state tensor,
    output and returned flag must be equal. (The kernel module is imported here, not at the top: importing triton
    fixes its mode, which the CPU tests set first.)"""
    from dgemma_lsp.backend.kernels.canvas_state import canvas_state_update

    ref_states, ref_kw = copy.deepcopy(states), copy.deepcopy(kw)
    got = canvas_state_update(states, impl="triton", **kw)
    want = canvas_state_update(ref_states, impl="torch", **ref_kw)
    for f in FIELDS:
        assert torch.equal(getattr(states, f), getattr(ref_states, f)), f
    for f in ("pin_active", "sampled", "num_sampled"):
        assert torch.equal(kw[f], ref_kw[f]), f
    for f in ("new_step", "keep_self_conditioning", "final"):
        assert torch.equal(getattr(got, f), getattr(want, f)), f


def check_inputs_against_reference(kw: dict):
    """``step_inputs`` as the kernel and as PyTorch: equal (the temperature to 1e-6: FMA on the GPU); returns the
    kernel's."""
    from dgemma_lsp.backend.kernels.canvas_state import step_inputs

    got = step_inputs(impl="triton", **kw)
    want = step_inputs(impl="torch", **kw)
    for f in ("seed", "pinned", "pinned_tokens", "width", "cap", "bound"):
        assert torch.equal(getattr(got, f), getattr(want, f)), f
    torch.testing.assert_close(got.temperature, want.temperature, rtol=1e-6, atol=0)
    return got
