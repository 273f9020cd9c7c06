"""The request-state kernel (backend/kernels/canvas_state.py) against its PyTorch reference, in Triton's interpreter.

Fresh random states each case: commits beside denoising requests, history rings at every write position, widths
below the canvas, requests that converge by stability (identical history, low entropy) or by the step cap, pins.
Every state tensor the update touches must come out equal to the reference's.
"""

from __future__ import annotations

from tests.support.interpreter_mode import enter_interpreter_mode, rerun_if_late

_LATE = enter_interpreter_mode()  # before triton is imported (see tests/support/interpreter_mode.py)

import pytest  # noqa: E402
import torch  # noqa: E402

from dgemma_lsp.backend.kernels.canvas_state import canvas_state_update  # noqa: E402
from tests.support.canvas_state_cases import (  # noqa: E402
    check_inputs_against_reference,
    check_update_against_reference,
    make_case,
    make_inputs_case,
)


@pytest.mark.parametrize(
    "n,nd,cl,st,seed",
    [(4, 4, 16, 2, 0), (4, 3, 24, 3, 1), (8, 5, 256, 2, 2), (6, 6, 40, 1, 3), (4, 1, 256, 3, 4), (16, 7, 33, 4, 5)],
)
def test_kernel_matches_reference(n: int, nd: int, cl: int, st: int, seed: int) -> None:
    check_update_against_reference(*make_case(n, nd, cl, st, seed))


def test_cases_reach_every_outcome() -> None:
    """The cases above are not all alike: commits, convergence by stability and by the cap, and plain steps."""
    seen = set()
    for n, nd, cl, st, seed in [(4, 4, 16, 2, 0), (4, 3, 24, 3, 1), (8, 5, 256, 2, 2), (16, 7, 33, 4, 5)]:
        states, kw = make_case(n, nd, cl, st, seed)
        commit = states.is_encoder_phase[kw["slots"]].clone()
        step_before = states.step[kw["slots"]].clone()
        out = canvas_state_update(states, impl="triton", **kw)
        for i in range(nd):
            if commit[i]:
                seen.add("commit")
                assert int(out.new_step[i]) == 0 and not out.final[i]
                assert int(kw["num_sampled"][kw["decode_idx"][i]]) == int(kw["emit"][i])
            elif out.final[i] and float(step_before[i] + 1) >= float(kw["cap"][i]):
                seen.add("cap")
            elif out.final[i]:
                seen.add("stable")
                # a converged request's next canvas is its argmax canvas (what the commit step emits)
                assert torch.equal(states.canvas[kw["slots"][i]], kw["argmax"][i])
            else:
                seen.add("denoise")
                assert int(kw["num_sampled"][kw["decode_idx"][i]]) == 0
    assert seen == {"commit", "cap", "stable", "denoise"}, seen


def test_a_commit_clears_pins_and_renoises() -> None:
    states, kw = make_case(4, 4, 16, 2, 7)
    states.is_encoder_phase[:] = True
    kw["pin_active"][:] = True
    canvas_state_update(states, impl="triton", **kw)
    assert not kw["pin_active"].any()
    assert torch.equal(states.canvas[kw["slots"]], kw["renoise"])
    assert not states.is_encoder_phase.any()
    assert (states.accepted_canvas_history_len[kw["slots"]] == 0).all()


@pytest.mark.parametrize("n,nd,cl,seed", [(4, 4, 16, 0), (8, 3, 24, 1), (6, 1, 256, 2), (16, 7, 33, 3)])
def test_step_inputs_kernel_matches_reference(n: int, nd: int, cl: int, seed: int) -> None:
    kw = make_inputs_case(n, nd, cl, seed)
    got = check_inputs_against_reference(kw)
    # what the rows get: each request's own schedule and pins, seeds that differ per position and per request
    assert got.temperature.shape == (nd * cl,) and bool((got.temperature > 0).all())
    assert got.seed.view(nd, cl).unique().numel() == nd * cl
    active = kw["pin_active"][kw["slots"]]
    assert not got.pinned.view(nd, cl)[~active].any()


rerun_if_late(globals(), __file__, _LATE)
