"""Our DiffusionGemma model for vLLM 0.26-0.31: vLLM's model class with our sampler, as plain module-level classes.

:func:`.vllm_plugin.register` registers :class:`DGemmaLspForConditionalGeneration` for
``DiffusionGemmaForBlockDiffusion`` as a ``"module:Class"`` string, so vLLM imports this module (and vLLM with it,
at the top) in its engine processes only, and only on the vLLM releases it was written against (0.26-0.31; on
>= 0.32 it is never registered).

* :class:`DGemmaSampler` (a subclass of vLLM's ``DiffusionSampler``): a denoising step on our Triton kernels
  (:mod:`.kernels`: one pass over the logits for softcap, temperature, argmax, sample, entropy and the
  self-conditioning softmax; a sort-free entropy-bound acceptance with pins and renoise), the request bookkeeping in
  two launches (:mod:`.kernels.canvas_state`), a commit step that only emits the argmax canvas, vLLM 0.32's
  per-request options (``diffusion_canvas_length``, ``diffusion_seed_canvas``, ``diffusion_pinned``,
  ``diffusion_max_steps``) plus ``dgemma_entropy_bound``, ``dgemma_t_min`` / ``dgemma_t_max`` and ``dgemma_seed``
  (per-row noise streams: a seeded request samples the same whatever shares its batch), and the draft tap:
  requests with ``extra_args["dgemma_draft_tap"]`` push each step's argmax canvas to the zmq address in
  ``DGEMMA_DRAFT_TAP`` (our backend binds it and sets the variable for the engine process).
* :class:`DGemmaModelState`: hands vLLM's runner our sampler, has the model hand over uncapped logits (the row
  kernel applies the softcap), gives covered fused-MoE experts our fp8 quantization (:mod:`.vllm_moe`) and runs the
  self-conditioning MLP once over all of a step's canvases (:mod:`.vllm_selfcond`).
* :class:`DGemmaLspForConditionalGeneration`: vLLM's model class with that model state.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any

import numpy as np
import torch
from vllm.logger import init_logger
from vllm.model_executor.models import diffusion_gemma as dg
from vllm.v1.worker.gpu.buffer_utils import async_copy_to_gpu

from . import vllm_moe
from . import vllm_selfcond as selfcond
from .kernels import denoise_step
from .kernels.canvas_state import canvas_state_update, step_inputs
from .vllm_plugin import DRAFT_TAP_ENV, SAMPLER_FEATURES, activate

log = init_logger(f"vllm.{__name__}")  # under "vllm": the only logger tree with handlers in the engine process
# The row kernel's launch: a 2048-entry vocabulary block, one program a row, inverse-CDF sampling in the
# probabilities pass: the H200 kernel sweep's pick (bench/gpu_step.py --parts kernels; bench/RESULTS.md).
KERNEL_OPTIONS: dict[str, Any] = {"block_v": 2048, "splits": 1, "sample": "cdf"}


class DGemmaSampler(dg.DiffusionSampler):
    """vLLM's DiffusionSampler with our kernels, commit skip, per-request options and the draft tap."""

    @classmethod
    def from_native(cls, native: Any) -> DGemmaSampler:
        self = cls.__new__(cls)
        self.__dict__.update(native.__dict__)
        self._init_dgemma()
        return self

    def _init_dgemma(self) -> None:
        st = self.diffusion_states
        n, cl, dev = st.max_num_reqs, self.canvas_length, st.device
        self.g_steps = float(st.max_denoising_steps)
        self.cap = torch.full((n,), self.g_steps, dtype=torch.float32, device=dev)
        self.width = torch.full((n,), cl, dtype=torch.int64, device=dev)
        self.bound = torch.full((n,), float(self.entropy_bound), dtype=torch.float32, device=dev)
        self.tmin = torch.full((n,), float(self.t_min), dtype=torch.float32, device=dev)
        self.tmax = torch.full((n,), float(self.t_max), dtype=torch.float32, device=dev)
        self.pin_mask = torch.zeros((n, cl), dtype=torch.bool, device=dev)
        self.pin_tok = torch.zeros((n, cl), dtype=torch.int64, device=dev)
        self.pin_active = torch.zeros((n,), dtype=torch.bool, device=dev)
        self.seed_canvas: dict[int, list[int]] = {}
        self.seeds: dict[int, int | None] = {}
        self.width_host = np.full((n,), cl, dtype=np.int64)
        self.tap: set[int] = set()
        self.rng_base = torch.zeros((n,), dtype=torch.int64, device=dev)
        self.stats = {"steps": 0, "commit_only": 0, "fallback": 0}
        # the request bookkeeping around a step: two Triton launches instead of ~110 small PyTorch ops
        self.state_impl = "auto"
        # set by the model state when the model hands over uncapped logits (the ``softcap`` piece)
        self.softcap: float | None = None
        self._segments = torch.arange(0, (n + 1) * cl, cl, device=dev, dtype=torch.int32)
        # Host mirror of is_encoder_phase, refreshed by a non-blocking copy at the end of each step: the next
        # step reads it without stalling vLLM's async scheduling (the GPU is busy with the next forward).
        self._phase_np = np.zeros((n,), dtype=bool)
        self._phase_pinned = torch.zeros((n,), dtype=torch.bool, pin_memory=dev.type == "cuda")
        self._phase_evt = torch.cuda.Event() if dev.type == "cuda" else None
        self._phase_pending = False
        self._sock: Any = None  # a zmq PUSH socket once the draft tap is on
        self._tap_q: queue.Queue | None = None
        tap_addr = os.environ.get(DRAFT_TAP_ENV)  # set by our backend before it starts the engine
        if tap_addr:
            import zmq

            self._sock = zmq.Context.instance().socket(zmq.PUSH)
            self._sock.setsockopt(zmq.SNDHWM, 1000)
            self._sock.connect(tap_addr)
            self._tap_q = queue.Queue()
            threading.Thread(target=self._tap_worker, name="dgemma-draft-tap", daemon=True).start()

    def _host_phase(self) -> np.ndarray:
        if self._phase_pending:
            if self._phase_evt is not None:
                self._phase_evt.synchronize()
            self._phase_np[:] = self._phase_pinned.numpy()
            self._phase_pending = False
        return self._phase_np

    def _publish_phase(self) -> None:
        self._phase_pinned.copy_(self.diffusion_states.is_encoder_phase, non_blocking=True)
        if self._phase_evt is not None:
            self._phase_evt.record()
        self._phase_pending = True

    def _tap_worker(self) -> None:
        import zmq

        assert self._tap_q is not None  # the worker runs only with the draft tap
        while True:
            evt, rids, steps, toks, widths = self._tap_q.get()
            if evt is not None:
                evt.synchronize()  # off the engine thread: the engine never waits for a draft
            st = steps.tolist()
            arr = toks.numpy()
            for j, rid in enumerate(rids):
                if st[j] == 0:  # a commit step: nothing new to show
                    continue
                try:
                    msg = [rid.encode(), str(abs(st[j])).encode(), arr[j, : widths[j]].tobytes()]
                    self._sock.send_multipart(msg + [b"final"] if st[j] < 0 else msg, zmq.NOBLOCK)
                except Exception:  # a full or closed tap must never stall the engine
                    pass

    # ---------------------------------------------------------------- requests
    def add_request(self, req_idx: int, prompt_len: int, sampling_params: Any) -> None:
        super().add_request(req_idx, prompt_len, sampling_params)
        cl = self.canvas_length
        extra: dict[str, Any] = getattr(sampling_params, "extra_args", None) or {}
        tap = bool(extra.get("dgemma_draft_tap"))
        width = int(extra.get("diffusion_canvas_length") or cl)
        if not 1 <= width <= cl:
            raise ValueError(f"diffusion_canvas_length must be in 1..{cl} (got {width})")
        self.width[req_idx] = width
        self.width_host[req_idx] = width
        self.cap[req_idx] = float(extra.get("diffusion_max_steps") or self.g_steps)
        self.bound[req_idx] = float(extra.get("dgemma_entropy_bound") or self.entropy_bound)
        self.tmin[req_idx] = float(extra.get("dgemma_t_min", float(self.t_min)))
        self.tmax[req_idx] = float(extra.get("dgemma_t_max", float(self.t_max)))
        seed = extra.get("diffusion_seed_canvas")
        self.pin_mask[req_idx] = False
        self.pin_active[req_idx] = False
        self.seed_canvas.pop(req_idx, None)
        if seed is not None:
            ids = [int(t) for t in seed][:cl]
            self.seed_canvas[req_idx] = ids
            pins = [int(p) for p in extra.get("diffusion_pinned") or () if 0 <= int(p) < len(ids)]
            if pins:
                tok = torch.zeros(cl, dtype=torch.int64)
                tok[: len(ids)] = torch.tensor(ids, dtype=torch.int64)
                mask = torch.zeros(cl, dtype=torch.bool)
                mask[pins] = True
                self.pin_tok[req_idx] = tok.to(self.pin_tok.device)
                self.pin_mask[req_idx] = mask.to(self.pin_mask.device)
                self.pin_active[req_idx] = True
        seed_no = extra.get("dgemma_seed", getattr(sampling_params, "seed", None))
        self.seeds[req_idx] = None if seed_no is None else int(seed_no)
        self._host_phase()[req_idx] = True  # vLLM's add_request put the slot in the prefill/commit phase
        if tap:
            self.tap.add(req_idx)
        else:
            self.tap.discard(req_idx)

    def _finish_prefills(self, input_batch: Any, prefill_indices_np: np.ndarray) -> None:
        states = self.diffusion_states
        done = (
            input_batch.num_computed_prefill_tokens_np[prefill_indices_np]
            + input_batch.num_scheduled_tokens[prefill_indices_np]
            >= input_batch.prefill_len_np[prefill_indices_np]
        )
        ps = input_batch.idx_mapping_np[prefill_indices_np[done]]
        if len(ps) == 0:
            return
        states.init_canvas(ps)
        self._host_phase()[ps] = False
        for slot in ps.tolist():
            seed = self.seeds.get(slot)
            if seed is not None:  # a seeded request's first canvas is reproducible too
                g = torch.Generator(device=states.device)
                g.manual_seed(int(seed))
                states.canvas[slot] = torch.randint(
                    0, self.vocab_size, (self.canvas_length,), generator=g, device=states.device
                )
            ids = self.seed_canvas.get(slot)
            if ids:
                states.canvas[slot, : len(ids)] = torch.tensor(ids, dtype=torch.int64, device=states.device)
        self.req_states.draft_tokens[ps, : self.canvas_length] = states.canvas[ps]
        ps_gpu = async_copy_to_gpu(ps.astype(np.int64), device=states.is_encoder_phase.device)
        states.is_encoder_phase.index_fill_(0, ps_gpu, False)

    # -------------------------------------------------------------------- step
    def __call__(self, logits: torch.Tensor, input_batch: Any, draft_logits: torch.Tensor | None = None):
        num_reqs = input_batch.num_reqs
        if input_batch.num_draft_tokens == 0:
            return self._handle_prefill(input_batch, logits.device)
        slots_np = input_batch.idx_mapping_np[:num_reqs]
        if self.tp_size > 1 or self.sampling_states.max_num_logprobs(slots_np) >= 0:
            # logprobs and tensor parallelism stay on vLLM's own path
            self.stats["fallback"] += 1
            self._host_phase()
            if self.softcap:
                logits = torch.tanh(logits.float() / self.softcap) * self.softcap
            out = super().__call__(logits, input_batch, draft_logits)
            self._publish_phase()
            return out
        return self._step(logits, input_batch)

    def _step(self, logits: torch.Tensor, input_batch: Any):
        states = self.diffusion_states
        cl = self.canvas_length
        num_reqs = input_batch.num_reqs
        dev = logits.device
        slots_np = input_batch.idx_mapping_np[:num_reqs]
        per_req_nlogits_np = np.diff(input_batch.cu_num_logits_np[: num_reqs + 1])
        decode_indices_np = np.where(per_req_nlogits_np > 0)[0]
        prefill_indices_np = np.where(per_req_nlogits_np == 0)[0]
        if len(prefill_indices_np) > 0:
            self._finish_prefills(input_batch, prefill_indices_np)
        sampled = self._sampled[:num_reqs]
        num_sampled = self._num_sampled[:num_reqs]
        sampled.zero_()
        num_sampled.zero_()
        all_slots = input_batch.idx_mapping[:num_reqs]
        nd = len(decode_indices_np)
        if nd == 0:
            self.req_states.draft_tokens[all_slots, :cl] = states.canvas[all_slots]
            return self._build_output(input_batch, sampled, num_sampled, per_req_nlogits_np, dev)
        decode_slots_np = slots_np[decode_indices_np]
        self._decode_slots.np[:nd] = decode_slots_np
        self._decode_idx.np[:nd] = decode_indices_np
        self._decode_slots.copy_to_uva()
        self._decode_idx.copy_to_uva()
        slots = self._decode_slots.gpu[:nd]
        didx = self._decode_idx.gpu[:nd]
        valid_np = per_req_nlogits_np[decode_indices_np].astype(np.int64)
        emit_np = np.minimum(valid_np, self.width_host[decode_slots_np])
        emit = async_copy_to_gpu(emit_np, device=dev)

        commit_host = self._host_phase()[decode_slots_np]
        random_tokens = torch.randint(0, self.vocab_size, (nd, cl), device=dev, dtype=states.canvas.dtype)
        self.stats["steps"] += 1
        if all(commit_host):
            self.stats["commit_only"] += 1
            sampled[didx] = states.argmax_canvas[slots, :cl].to(sampled.dtype)
            num_sampled[didx] = emit.to(num_sampled.dtype)
            states.step[slots] = 0
            states.accepted_canvas_history_len[slots] = 0
            states.canvas[slots] = random_tokens
            states.is_encoder_phase[slots] = False
            states.self_conditioning_embeds[slots] = 0
            self.pin_active[slots] = False
            self.req_states.draft_tokens[all_slots, :cl] = states.canvas[all_slots]
            self._publish_phase()
            return self._build_output(input_batch, sampled, num_sampled, per_req_nlogits_np, dev)

        # pad a canvas truncated near max_model_len back to CL (as vLLM does)
        if valid_np.min() < cl:
            vt = async_copy_to_gpu(valid_np, device=dev)
            ar = torch.arange(cl, device=dev)
            starts = vt.cumsum(0) - vt
            ok = ar[None, :] < vt[:, None]
            src = (starts[:, None] + ar[None, :]).clamp_max(logits.shape[0] - 1)
            logits = logits[src.reshape(-1)] * ok.reshape(-1, 1).to(logits.dtype)
        logits = logits[: nd * cl]
        base = torch.randint(0, 2**31 - 1, (nd,), device=dev, dtype=torch.int64)
        seeded = [(i, s) for i, s in enumerate(decode_slots_np.tolist()) if self.seeds.get(s) is not None]
        for i, s in seeded:
            base[i] = int(self.seeds[s] or 0) % 2_147_483_647
        # per row: temperature, noise seeds (seeded requests get (seed, step, position) streams, the rest fresh
        # random ones), pins; per request: width, step cap, entropy bound
        inp = step_inputs(
            slots=slots,
            base_seed=base,
            step=states.step,
            cap=self.cap,
            t_min=self.tmin,
            t_max=self.tmax,
            bound=self.bound,
            width=self.width,
            pin_mask=self.pin_mask,
            pin_tokens=self.pin_tok,
            pin_active=self.pin_active,
            impl=self.state_impl,
        )
        if seeded:
            # seeded renoise from the same per-row seeds (integer hash on the GPU: no host sync)
            rows = async_copy_to_gpu(np.array([i for i, _ in seeded], dtype=np.int64), device=dev)
            h = (inp.seed.view(nd, cl)[rows].to(torch.int64) * 2_654_435_761 + 97) % 4_294_967_291
            random_tokens[rows] = (h % self.vocab_size).to(random_tokens.dtype)
        out = denoise_step(
            logits,
            inp.temperature,
            renoise_tokens=random_tokens.reshape(-1),
            seed=inp.seed,
            entropy_bound=inp.bound,
            segments=self._segments[: nd + 1],
            pinned=inp.pinned,
            pinned_tokens=inp.pinned_tokens,
            probs_dtype=self.embed_weight.dtype,
            softcap=self.softcap,
            widths=inp.width,
            max_segment=cl,
            impl="triton",
            **KERNEL_OPTIONS,
        )
        upd = canvas_state_update(
            states,
            slots=slots,
            decode_idx=didx,
            argmax=out.argmax.view(nd, cl),
            next_canvas=out.next_canvas.view(nd, cl),
            entropy=out.entropy.view(nd, cl),
            renoise=random_tokens,
            width=inp.width,
            cap=inp.cap,
            emit=emit,
            pin_active=self.pin_active,
            sampled=sampled,
            num_sampled=num_sampled,
            confidence_threshold=self.confidence_threshold,
            impl=self.state_impl,
        )
        assert out.probs is not None  # probs_dtype was given
        probs = out.probs.view(nd, cl, -1)
        soft = torch.matmul(probs, self.embed_weight[: probs.shape[-1]]) * self.normalizer
        states.self_conditioning_embeds[slots] = soft.float() * upd.keep_self_conditioning[:, None, None]
        self.req_states.draft_tokens[all_slots, :cl] = states.canvas[all_slots]
        self._publish_phase()
        if self._tap_q is not None and self.tap:
            self._queue_drafts(
                input_batch, decode_indices_np, decode_slots_np, out.argmax.view(nd, cl), upd.new_step, upd.final
            )
        return self._build_output(input_batch, sampled, num_sampled, per_req_nlogits_np, dev)

    def _queue_drafts(self, input_batch, decode_indices_np, decode_slots_np, argmax_tokens, new_step, final):
        # a denoising step's draft: step >= 1; a commit step: -1 (not sent); final: the step converged, so
        # this draft is exactly the canvas the next (commit) step emits (vLLM emits argmax_canvas there)
        rows = [i for i, s in enumerate(decode_slots_np.tolist()) if s in self.tap]
        if not rows:
            return
        idx = async_copy_to_gpu(np.array(rows, dtype=np.int64), device=argmax_tokens.device)
        # non-blocking copies into pinned memory; the tap thread waits for them, the engine does not
        pin = argmax_tokens.is_cuda
        toks = torch.empty((len(rows), argmax_tokens.shape[1]), dtype=torch.int32, pin_memory=pin)
        steps = torch.empty((len(rows),), dtype=torch.int32, pin_memory=pin)
        toks.copy_(argmax_tokens[idx].to(torch.int32), non_blocking=True)
        is_denoise = new_step[idx] > 0
        code = torch.where(final[idx], -new_step[idx], new_step[idx])  # negative: the final draft
        steps.copy_(torch.where(is_denoise, code, 0).to(torch.int32), non_blocking=True)
        evt = torch.cuda.Event() if argmax_tokens.is_cuda else None
        if evt is not None:
            evt.record()
        rids = [input_batch.req_ids[int(decode_indices_np[i])] for i in rows]
        widths = [int(self.width_host[int(decode_slots_np[i])]) for i in rows]
        self._tap_q.put((evt, rids, steps, toks, widths))


# sc_batch where vLLM's model state has the per-request method it replaces; else vLLM's loop serves (correct too)
SC_BATCH = selfcond.overridable(dg.DiffusionGemmaModelState)
if not SC_BATCH:
    log.info("dgemma_lsp plugin: sc_batch off: this vLLM's model state has no _apply_self_conditioning%s",
             str(selfcond.SC_PARAMS))  # fmt: skip


class DGemmaModelState(dg.DiffusionGemmaModelState):
    _dgemma_sampler: DGemmaSampler | None = None  # set by custom_sampler

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # built after the weights were processed, so vLLM's experts objects exist by now
        n = vllm_moe.install(self.model)
        if n:
            log.info("dgemma_lsp plugin: fused fp8 activation quantization in %d MoE layers", n)

    def custom_sampler(self, sampler: Any) -> tuple[Any, Any] | None:
        native, rejection = super().custom_sampler(sampler)
        log.info(
            "dgemma_lsp plugin: DiffusionGemma sampler with Triton kernels (%s)", ", ".join(sorted(SAMPLER_FEATURES))
        )
        ours = DGemmaSampler.from_native(native)
        self._dgemma_sampler = ours
        cap = getattr(self.model, "final_logit_softcapping", None)
        if cap and hasattr(self.model, "dgemma_raw_logits"):
            ours.softcap = float(cap)
            self.model.dgemma_raw_logits = True
        return ours, rejection

    def _apply_self_conditioning(
        self,
        decode_slots_np: np.ndarray,
        decode_idx_np: np.ndarray,
        query_start_loc_np: np.ndarray,
        inputs_embeds: torch.Tensor,
        sc_embeds: torch.Tensor,
    ) -> None:
        # sc_batch: one MLP call over every canvas's rows when they lie back to back (vllm_selfcond.py)
        if SC_BATCH and len(decode_idx_np) > 1:
            to_gpu = lambda a: async_copy_to_gpu(a, device=inputs_embeds.device)  # noqa: E731
            args = (decode_slots_np, decode_idx_np, query_start_loc_np, inputs_embeds, sc_embeds, to_gpu)
            if selfcond.apply_batched(self.model.self_conditioning, *args):
                return
        super()._apply_self_conditioning(decode_slots_np, decode_idx_np, query_start_loc_np, inputs_embeds, sc_embeds)


class DGemmaLspForConditionalGeneration(dg.DiffusionGemmaForConditionalGeneration):
    # True once our sampler applies the softcap itself (set by DGemmaModelState.custom_sampler)
    dgemma_raw_logits = False

    # the plugin's process-wide pieces, for DiffusionGemma only, before the layers pick an attention backend
    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        activate()
        super().__init__(vllm_config=vllm_config, prefix=prefix)

    @staticmethod
    def get_model_state_cls():
        return DGemmaModelState

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        if not self.dgemma_raw_logits:
            return super().compute_logits(hidden_states)
        return self.logits_processor(self.lm_head, hidden_states)
