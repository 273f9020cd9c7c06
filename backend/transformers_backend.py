"""The transformers backend: DiffusionGemma through transformers' own reference ``generate``.

It drives ``DiffusionGemmaForBlockDiffusion.generate`` in a worker thread and turns its streamer
callbacks into contract events: ``put_draft`` (after every denoising step) becomes a :class:`Draft`
and the cancellation/deadline check point, ``put`` (after every canvas) becomes a :class:`Committed`.
Because the denoising loop is transformers' own, its output for a fixed RNG seed is the reference.

Pinned positions are added through a logits processor that makes the pinned token certain at its
position (a one-hot distribution): the denoiser then samples it, accepts it first (entropy 0), never
renoises it, and reports it in the argmax canvas, so pins survive every step unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .chat_tokens import chat_prompt_ids, text_ids
from .contract import (
    BackendError,
    BackendInfo,
    BackendUnavailable,
    CanvasEvent,
    CanvasRequest,
    Committed,
    DeadlineExceeded,
    Done,
    Draft,
    ProgressCallback,
    Stats,
)
from .cpu import ThreadGovernor

if TYPE_CHECKING:
    from dgemma_lsp.config import Settings

    from .prompt_cache import PromptCache

log = logging.getLogger(__name__)

PIN_LOGIT_GAP = 1.0e4  # large enough that softmax is exactly one-hot in float32, small enough to stay finite / t


class _Stop(Exception):
    """Raised inside the worker thread to unwind ``generate`` at the next step boundary."""

    def __init__(self, reason: BackendError) -> None:
        super().__init__(str(reason))
        self.reason = reason


def resolve_device(device: str) -> str:
    import torch

    if device in ("", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BackendUnavailable(f"device {device!r} requested but no CUDA GPU is available (use device=cpu)")
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    import torch

    if dtype in ("", "auto"):
        if device.startswith("cuda"):
            return torch.bfloat16
        from .cpu import bf16_native

        return torch.bfloat16 if bf16_native() else torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    except KeyError:
        raise BackendUnavailable(f"unknown dtype {dtype!r} (use auto, float32, bfloat16 or float16)") from None


def check_checkpoint_folder(path: Path) -> None:
    """One clear error for a folder that is not a DiffusionGemma checkpoint."""
    import json

    cfg = path / "config.json"
    if not cfg.is_file():
        raise BackendUnavailable(f"{path} is not a model folder (no config.json)")
    try:
        model_type = json.loads(cfg.read_text(encoding="utf-8")).get("model_type")
    except (ValueError, OSError) as exc:
        raise BackendUnavailable(f"{cfg} is unreadable: {exc}") from None
    if model_type != "diffusion_gemma":
        raise BackendUnavailable(
            f"{path} holds a {model_type or 'unknown'!s} model, not DiffusionGemma (model_type must be diffusion_gemma)"
        )
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise BackendUnavailable(
            f"{path} has a DiffusionGemma config but no weights (model.safetensors or model.int8.safetensors)"
        )


def looks_like_path(ref: str) -> bool:
    """Hub ids are ``org/name``; anything else with a separator or a leading ./ ~ / is a folder."""
    return ref.startswith(("/", ".", "~")) or ref.count("/") > 1 or "\\" in ref


class _PinLogits:
    """Logits processor: one-hot logits at pinned positions of the first canvas."""

    def __init__(self, prompt_len: int, positions: Any, tokens: Any) -> None:
        self.prompt_len = prompt_len
        self.positions = positions
        self.tokens = tokens

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[1] != self.prompt_len:  # later canvases are unpinned
            return scores
        scores = scores.clone()
        pinned = scores[:, self.positions, :]
        pinned.fill_(-PIN_LOGIT_GAP)
        pinned.scatter_(-1, self.tokens.view(1, -1, 1).expand(scores.shape[0], -1, 1), 0.0)
        scores[:, self.positions, :] = pinned
        return scores


class _KeepLogits:
    """Logits processor that changes nothing: it keeps a canvas's first step's logits (after the pins, before the
    temperature schedule), from which the committed canvas's confidence is read."""

    observes_only = True  # the Triton kernel step (kernels/hf.py) keeps running with it in the list

    def __init__(self) -> None:
        self.first: Any = None  # the canvas's first step, from pure noise: what the prompt alone predicts

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.first is None:
            self.first = scores
        return scores


def token_logprobs(logits: Any, ids: Any, n: int) -> list[float]:
    """Log-probabilities, under ``logits`` (one canvas), of the first ``n`` canvas tokens ``ids``."""
    import torch

    if n <= 0 or logits is None:
        return []
    lp = torch.log_softmax(logits[0, :n].float(), dim=-1)
    idx = torch.as_tensor(ids[:n], device=lp.device).view(-1, 1)
    return lp.gather(-1, idx).view(-1).tolist()


def _geomean(logprobs: list[float]) -> float | None:
    return round(math.exp(sum(logprobs) / len(logprobs)), 4) if logprobs else None


class TransformersBackend:
    """Reference backend on transformers (CPU or one CUDA GPU)."""

    name = "transformers"

    def __init__(
        self, model: str, *, device: str = "auto", dtype: str = "auto", model_label: str = "", kernels: bool = True
    ) -> None:
        self.model_ref = model
        self.use_triton = kernels
        self.model_label = model_label or model
        self.requested_device = device
        self.requested_dtype = dtype
        self.model: Any = None
        self.tokenizer: Any = None
        self.device = "unloaded"
        self._load_lock = asyncio.Lock()
        self._gen_lock = threading.Lock()  # one generate() at a time: it mutates the global RNG and config
        self._load_error: BackendError | None = None
        self.active = 0  # generations running in the worker thread right now
        self.steps_run = 0  # denoising steps executed, across all requests (for tests and status)
        self.recommended: dict[str, float] = {}  # the checkpoint's dgemma_lsp.json, if any (model_card.py)
        self.prompts: PromptCache | None = None  # encoder caches of recent prompts (prompt_cache.py)
        self.threads = ThreadGovernor()  # CPU threads per generation, from the machine's load (cpu.py)
        self.finished: deque[tuple[float, float]] = deque(maxlen=256)  # (wall s, cpu s) of completed generations

    @classmethod
    def from_settings(cls, settings: Settings) -> TransformersBackend:
        from .defaults import default_model

        model, label = (settings.model, settings.model) if settings.model else default_model()
        return cls(
            str(model), device=settings.device, dtype=settings.dtype, model_label=label, kernels=settings.triton_kernels
        )

    # -- lifecycle ---------------------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self.model is not None

    async def start(self, progress: ProgressCallback | None = None) -> None:
        async with self._load_lock:
            if self.model is not None:
                return
            if progress:
                progress(f"loading {self.model_label}", 0)
            t0 = time.monotonic()
            await asyncio.to_thread(self._load)
            if progress:
                progress(f"loaded {self.model_label} on {self.device} in {time.monotonic() - t0:.1f}s", 100)

    def _load(self) -> None:
        import torch
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        device = resolve_device(self.requested_device)
        dtype = resolve_dtype(self.requested_dtype, device)
        path = Path(self.model_ref).expanduser()
        local = path.exists()
        if local:
            check_checkpoint_folder(path)
        elif looks_like_path(self.model_ref):
            raise BackendUnavailable(f"model folder {self.model_ref} does not exist")
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or local
        src = str(path) if local else self.model_ref
        from .int8_weights import Int8FormatError, is_int8_folder

        try:
            tokenizer, model = self._from_pretrained(src, dtype, offline, int8=local and is_int8_folder(path))
        except Int8FormatError as exc:
            raise BackendUnavailable(f"model {self.model_ref!r}: {exc}") from None
        except OSError as exc:
            hint = "HF_HUB_OFFLINE is set: download it elsewhere or pass --model PATH" if offline else str(exc)
            raise BackendUnavailable(f"model {self.model_ref!r} is not available locally ({hint})") from None
        except (ValueError, KeyError) as exc:
            raise BackendUnavailable(f"model {self.model_ref!r} could not be loaded as DiffusionGemma: {exc}") from None
        if tokenizer.chat_template is None:
            raise BackendUnavailable(
                f"model {self.model_ref!r} has no chat template (DiffusionGemma is prompted through it)"
            )
        model.to(device).eval()
        torch.set_grad_enabled(False)
        if self.use_triton and device.startswith("cuda"):
            try:  # one Triton pass per step instead of softmax + multinomial + argmax + two entropies
                from .kernels.hf import use_kernels

                use_kernels(model)
            except ImportError as exc:
                log.warning("Triton kernels unavailable, using transformers' own step: %s", exc)
        self.tokenizer, self.model, self.device = tokenizer, model, device
        from .prompt_cache import PromptCache

        self.prompts = PromptCache(model)
        if local:
            from .model_card import read_card

            self.recommended = read_card(path)
        self._warm_up()

    @staticmethod
    def _from_pretrained(src: str, dtype: Any, offline: bool, *, int8: bool) -> tuple[Any, Any]:
        from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

        if int8:  # shipped small: int8 weights, dequantized to the compute dtype (int8_weights.py)
            from .int8_weights import load_int8_model

            return AutoTokenizer.from_pretrained(src, local_files_only=True), load_int8_model(src, dtype)
        try:  # the local cache first: no network round trip when the weights are already here
            tokenizer = AutoTokenizer.from_pretrained(src, local_files_only=True)
            model = DiffusionGemmaForBlockDiffusion.from_pretrained(src, dtype=dtype, local_files_only=True)
        except OSError:
            if offline:
                raise
            tokenizer = AutoTokenizer.from_pretrained(src)
            model = DiffusionGemmaForBlockDiffusion.from_pretrained(src, dtype=dtype)
        return tokenizer, model

    def _warm_up(self) -> None:
        """One tiny generation so the first keystroke does not pay for lazy initialisation (~2 s on CPU)."""
        import torch

        state = torch.get_rng_state()
        try:
            ids = torch.tensor([[self.tokenizer.bos_token_id or 2]], device=self.device)
            old = self.model.config.canvas_length
            self.model.config.canvas_length = 4
            try:
                self.model.generate(ids, max_new_tokens=4, max_denoising_steps=1)
            finally:
                self.model.config.canvas_length = old
        finally:
            torch.set_rng_state(state)

    async def aclose(self) -> None:
        self.model = None
        self.tokenizer = None
        self.prompts = None

    def info(self) -> BackendInfo:
        detail: dict[str, Any] = {"steps_run": self.steps_run, "active": self.active}
        if self.model is not None:
            detail["triton_kernels"] = type(self.model).__name__.startswith("Kernel")
            detail["recommended"] = self.recommended
        if self.prompts is not None:
            detail["prompt_tokens_reused"] = self.prompts.reused_tokens
            detail["prompt_tokens_encoded"] = self.prompts.encoded_tokens
        if self.device == "cpu":
            detail["cpu_threads"] = {"cores": self.threads.cores, "last": self.threads.threads}
        if self.finished:
            walls, cpus = sorted(w for w, _ in self.finished), sorted(c for _, c in self.finished)
            detail["generate_p50_ms"] = {"wall": round(1e3 * walls[len(walls) // 2], 1),
                                         "cpu": round(1e3 * cpus[len(cpus) // 2], 1)}  # fmt: skip
        if self.model is not None:
            cfg = self.model.config
            detail.update(
                canvas_length=cfg.canvas_length,
                vocab_size=cfg.text_config.vocab_size,
                layers=cfg.text_config.num_hidden_layers,
                parameters=sum(p.numel() for p in self.model.parameters()),
                dtype=str(next(self.model.parameters()).dtype).replace("torch.", ""),
            )
        return BackendInfo(self.name, self.model_label, self.device, self.ready, detail)

    # -- tokens ------------------------------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        if self.tokenizer is None:
            return max(1, len(text) // 3) if text else 0  # before load: a conservative estimate
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def _stop_ids(self) -> set[int]:
        tok = self.tokenizer
        ids = {tok.eos_token_id} if tok.eos_token_id is not None else set()
        for t in ("<end_of_turn>", "<turn|>", "<eos>"):
            i = tok.convert_tokens_to_ids(t)
            if isinstance(i, int) and i != tok.unk_token_id and i is not None:
                ids.add(i)
        ids.discard(None)
        return ids

    def cut_at_eos(self, ids: Sequence[int]) -> tuple[list[int], bool]:
        """Canvas ids up to the first end-of-sequence token; returns (ids, hit_eos)."""
        stops = self._stop_ids()
        for n, i in enumerate(ids):
            if i in stops:
                return [int(t) for t in ids[:n]], True
        return [int(t) for t in ids], False

    def decode_canvas(self, ids: Sequence[int]) -> tuple[str, bool]:
        """Text of a canvas up to its first end-of-sequence token; returns (text, hit_eos)."""
        kept, eos = self.cut_at_eos(ids)
        return self.tokenizer.decode(kept, skip_special_tokens=True), eos

    def prompt_ids(self, request: CanvasRequest) -> list[int]:
        if request.prompt_ids is not None:
            return [int(i) for i in request.prompt_ids]
        # the document's text stays text: a "<start_of_turn>" in it must not open a turn (chat_tokens)
        return chat_prompt_ids(self.tokenizer, [{"role": m.role, "content": m.content} for m in request.messages or ()])

    # -- generation --------------------------------------------------------------------------------------------

    async def generate(self, request: CanvasRequest) -> AsyncGenerator[CanvasEvent, None]:
        if self.model is None:
            await self.start()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        cancel = request.cancel
        stop_flag = threading.Event()

        def emit(item: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        fut = loop.run_in_executor(None, self._run, request, emit, stop_flag)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, Done):
                    break
        finally:
            # Consumer went away (aclose/cancel) or finished: the worker stops at its next step boundary.
            stop_flag.set()
            if cancel is not None:
                cancel.cancel()
            if not fut.done():
                fut.add_done_callback(lambda f: f.exception())

    def _run(self, request: CanvasRequest, emit: Any, stop_flag: threading.Event) -> None:
        try:
            with self._gen_lock:
                self.active += 1
                try:
                    self._generate_locked(request, emit, stop_flag)
                finally:
                    self.active -= 1
        except _Stop as stop:
            emit(stop.reason)
        except BackendError as exc:
            emit(exc)
        except Exception as exc:  # a model failure must reach the consumer as one line, not kill the thread
            log.exception("transformers backend failed")
            emit(BackendError(f"generation failed: {type(exc).__name__}: {exc}"))

    def _check(self, request: CanvasRequest, stop_flag: threading.Event) -> None:
        if stop_flag.is_set() or (request.cancel is not None and request.cancel.cancelled):
            from .contract import Cancelled

            raise _Stop(Cancelled())
        if request.deadline is not None and time.monotonic() > request.deadline:
            raise _Stop(DeadlineExceeded())

    def _generate_locked(self, request: CanvasRequest, emit: Any, stop_flag: threading.Event) -> None:
        import torch
        from transformers import LogitsProcessorList
        from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

        self._check(request, stop_flag)  # it may have waited for the lock
        t0, cpu0 = time.monotonic(), time.thread_time()
        model, tok = self.model, self.tokenizer
        canvas = request.canvas_length
        vocab = model.config.text_config.vocab_size
        if request.rng_seed is not None:
            torch.manual_seed(request.rng_seed)
        prompt = self.prompt_ids(request)
        prompt_t = torch.tensor(prompt, dtype=torch.long, device=self.device)
        # the prompt's cached prefix (the previous keystroke's) is not encoded again: only its changed tail
        cache, reused = self.prompts.take(prompt_t, request.total_new_tokens) if self.prompts else (None, 0)
        input_ids = prompt_t[reused:].unsqueeze(0)
        log.debug("prompt of %d tokens, %d of them cached", len(prompt), reused)
        if self.device == "cpu":
            torch.set_num_threads(self.threads.pick())  # in this worker thread: OpenMP reads it per thread

        kwargs: dict[str, Any] = {}
        processors = LogitsProcessorList()
        seed = list(request.seed_canvas) if request.seed_canvas is not None else None
        if seed is None and request.seed_text is not None:
            seed = text_ids(tok, request.seed_text)
        if seed is not None:
            seed = [int(t) % vocab for t in seed[:canvas]]
            noise = torch.randint(0, vocab, (canvas - len(seed),)).tolist() if len(seed) < canvas else []
            kwargs["decoder_input_ids"] = torch.tensor([seed + noise], dtype=torch.long, device=self.device)
            if request.pinned:
                pins = sorted({int(p) for p in request.pinned if int(p) < len(seed)})
                if pins:
                    processors.append(
                        _PinLogits(
                            input_ids.shape[1],
                            torch.tensor(pins, device=self.device),
                            torch.tensor([seed[p] for p in pins], device=self.device),
                        )
                    )

        keep = _KeepLogits()
        processors.append(keep)  # after the pins: a pinned token counts as certain
        logprobs: list[float] = []  # of the committed tokens at their canvas's first step
        stats = Stats(backend=self.name, model=self.model_label, prompt_tokens=len(prompt))
        stats.extra["prompt_reused"] = reused
        state = {"canvas": 0, "step": 0, "seen_prompt": False, "drafts": 0}
        committed_texts: list[str] = []
        finished = {"eos": False}
        backend = self

        class _Streamer:
            def put(self, value: Any) -> None:
                if not state["seen_prompt"]:  # generate() first echoes the prompt
                    state["seen_prompt"] = True
                    return
                ids = value[0].tolist()
                kept, eos = backend.cut_at_eos(ids)
                text = tok.decode(kept, skip_special_tokens=True)
                # Confidence: how strongly the first step (pure noise, the prompt alone) predicted the committed
                # tokens. The last step's probabilities are no measure: it sees its own canvas and re-predicts it
                # (the small model gives its noise 0.96 there). The end-of-sequence token counts too.
                n = len(kept) + eos
                lps = token_logprobs(keep.first, ids, n)
                logprobs.extend(lps)
                keep.first = None
                if stats.first_commit_s is None:
                    stats.first_commit_s = time.monotonic() - t0
                stats.steps_per_canvas.append(state["step"])
                stats.tokens += len(kept)
                committed_texts.append(text)
                emit(Committed(state["canvas"], state["step"], text, ids, eos, _geomean(lps)))
                finished["eos"] = finished["eos"] or eos
                state["canvas"] += 1
                state["step"] = 0
                if request.stop_at_newline and "\n" in "".join(committed_texts).lstrip("\n"):
                    raise _Stop(BackendError("stop"))  # handled below as a normal finish
                backend._check(request, stop_flag)

            def put_draft(self, value: Any) -> None:
                state["step"] += 1
                state["drafts"] += 1
                backend.steps_run += 1
                if stats.first_draft_s is None:
                    stats.first_draft_s = time.monotonic() - t0
                if request.want_drafts:
                    ids = value[0].tolist()
                    text, _ = backend.decode_canvas(ids)
                    emit(Draft(state["canvas"], state["step"], text, ids))
                backend._check(request, stop_flag)

            def end(self) -> None:
                pass

        old_canvas = model.config.canvas_length
        model.config.canvas_length = canvas
        try:
            model.generate(
                input_ids,
                cache=cache,
                streamer=_Streamer(),
                logits_processor=processors,
                max_new_tokens=request.total_new_tokens,
                max_denoising_steps=request.max_denoising_steps,
                t_min=request.t_min,
                t_max=request.t_max,
                sampler_config=EntropyBoundSamplerConfig(entropy_bound=float(request.entropy_bound)),
                **kwargs,
            )
        except _Stop as stop:
            if str(stop.reason) != "stop":
                raise
        finally:
            model.config.canvas_length = old_canvas
            if self.prompts is not None and state["drafts"]:  # a draft comes after the encoder: the prompt is in
                self.prompts.put(prompt_t, cache)
        stats.canvases = len(stats.steps_per_canvas)
        steps = sum(stats.steps_per_canvas)
        stats.tokens_per_forward = stats.tokens / steps if steps else 0.0
        stats.wall_s = time.monotonic() - t0
        stats.extra["device"] = self.device
        # this thread's CPU time: the wall time on an idle core when it ran alone (one thread); the gap to wall_s is
        # what other processes took
        stats.extra["cpu_s"] = round(time.thread_time() - cpu0, 4)
        self.finished.append((stats.wall_s, stats.extra["cpu_s"]))
        if logprobs:
            stats.extra["confidence"] = _geomean(logprobs)
        emit(Done("".join(committed_texts), stats))
