#!/usr/bin/env bash
# The project's GPU stages on the H200 device machine (docs/gpu.md has the procedure).
#
#   bash tests/gpu/run_device.sh STAGE [STAGE ...]      (from the repo root, on the device; several stages run in order)
#
# The kit (vLLM 0.34 on torch 2.14 and what the image lacks) is built here first: `bash tests/gpu/kit/build.sh` writes
# .kit-0.34/part1 .. .kit-0.34/partN. Each device call carries one part; the machine keeps /tmp only while warm (~30 s
# after a call), so the calls follow each other at once. The kit installs into /tmp/site-0.34 ahead of the image's
# torch 2.11. KIT=0.33 (build, stage and install alike): vLLM 0.33 from .kit-0.33/part*, into /tmp/site-0.33 (both
# kits can sit on one warm machine; KIT picks the one a call's stages use).
#
# Stages:
#   stage       park the carried kit part in /tmp/kp-$KIT; says which parts are staged and which are missing
#   install     stage, then (all parts there) install the kit into /tmp/site-$KIT and check the versions, that every
#               part imports and that sm_90 code runs (tests/gpu/kit/check_kit_torch214.py)
#   kernels     GPU parity of our Triton kernels (no vLLM needed)
#   transformers  the transformers backend on CUDA (tiny checkpoint and the small model; no vLLM needed)
#   vllm        the vllm backend's GPU tests: tiny checkpoint end to end, the plugin's pieces against vLLM's
#               (PYTEST_ARGS: e.g. "-k drafts", or tests/gpu/test_gpu_vllm_plugin_scope.py to add the plugin's reach)
#   lsp-tiny    the language server on the vllm backend over stdio (pytest-lsp), tiny checkpoint
#   lsp-full    the same on the full-size 26B-A4B config with random weights (FP8 variant's scheme; LSP_FULL_DTYPE=bf16)
#   keystroke   bench/keystroke_e2e.py on the full-size config: KEYSTROKE_CONFIGS (default in the script) in one run
#               NEXT_EDITS=N (default 0): then N timed dgemma/nextEdit requests per config, same server and engine
#   step        bench/gpu_step.py --parts vllm with JOBS (and JOB_TIMEOUTS): engine step timings
#   sweep       bench/gpu_step.py with PARTS (floors,kernels,transformers; ARGS for more options)
#   lean-train  the embedded model's trainer (training/lean_train.py; carry packs .train_data/pack-*.jsonl.gz, they
#               stay in /tmp/train_data for later calls): LEAN_MIN minutes, LEAN_ARGS; LEAN_INIT=/tmp/lean continues
#               the last run on the same warm machine (LEAN_INIT=backend/models/small: from the shipped int8 model);
#               LEAN_PROFILE=1 adds $OUT/lean-profile.txt (kernels of 5 steps); LEAN_MANIFEST=0 skips the corpus
#               manifest (up to 3 min; a short profiling call). The int8 checkpoint comes back as
#               $OUT/lean-int8.tar.part-* (cat them), the log as $OUT/lean.log, the corpus manifest as $OUT/corpus.json
#
# Output: $OUT/<stage>.log for each stage, plus the rows a benchmark writes ($OUT/*.jsonl, $OUT/*.md). Keep what comes
# back outside the tree (device logs do not belong in it); quote the figures in bench/RESULTS.md.
set -uo pipefail
[ $# -ge 1 ] || { sed -n '2,34p' "$0"; exit 2; }
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_USE_V2_MODEL_RUNNER=1 TOKENIZERS_PARALLELISM=false
KIT="${KIT:-0.34}"; SITE="/tmp/site-$KIT"
export KIT
# compile caches in /tmp, one per kit: a warm machine reuses them from one call to the next (an engine starts in
# ~60 s, not ~5 min)
export VLLM_CACHE_ROOT="/tmp/vllm-cache-$KIT" TRITON_CACHE_DIR="/tmp/triton-cache-$KIT"
T0=$(date +%s)
PYT=(python3 -m pytest -q -rA --noconftest -p no:cacheprovider -o addopts= -s)

install_shim() {
  # our package as installed (dgemma_lsp, dgemma_lsp.backend, dgemma_lsp.lsp) with the vllm.general_plugins entry
  # point and the dgemma-lsp console script, no build
  rm -rf /tmp/dg && mkdir -p /tmp/dg/dgemma_lsp /tmp/dg/dgemma_lsp-0.1.0.dist-info /tmp/dg/bin
  cp -r dgemma_lsp/. /tmp/dg/dgemma_lsp/ && cp -r lsp /tmp/dg/dgemma_lsp/lsp && cp -r backend /tmp/dg/dgemma_lsp/backend
  touch /tmp/dg/dgemma_lsp/__init__.py
  printf 'Metadata-Version: 2.1\nName: dgemma-lsp\nVersion: 0.1.0\n' > /tmp/dg/dgemma_lsp-0.1.0.dist-info/METADATA
  printf '[vllm.general_plugins]\ndgemma_lsp = dgemma_lsp.backend.vllm_plugin:register\n' \
    > /tmp/dg/dgemma_lsp-0.1.0.dist-info/entry_points.txt
  # the __main__ guard matters: vLLM spawns its engine core, which imports the parent's main module again
  printf '#!/usr/bin/env python3\nimport sys\nfrom dgemma_lsp.cli import entry\nif __name__ == "__main__":\n    sys.exit(entry())\n' > /tmp/dg/bin/dgemma-lsp
  chmod +x /tmp/dg/bin/dgemma-lsp
  export PATH="/tmp/dg/bin:$PATH"
  if [ -f "$SITE/.kit-installed" ]; then export PYTHONPATH="/tmp/dg:$SITE"; else export PYTHONPATH=/tmp/dg; fi
  # CuTe DSL's packages sit beside its own .pth file, which a PYTHONPATH folder does not read (vLLM 0.34 imports
  # `cutlass` at every engine's warm-up on CUDA)
  [ -d "$SITE/nvidia_cutlass_dsl/dsl_packages" ] && export PYTHONPATH="$PYTHONPATH:$SITE/nvidia_cutlass_dsl/dsl_packages"
}
need_kit() { [ -f "$SITE/.kit-installed" ] || { echo "no kit $KIT in $SITE: run the stage/install calls first"; return 3; }; }
# Every engine this call started must be gone when it ends (an orphaned engine keeps ~45 GB of GPU memory)
reap_engines() {
  local pids
  pids=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ')
  for p in $pids; do echo "left on the GPU: pid $p ($(cat /proc/"$p"/cmdline 2>/dev/null | tr '\0' ' ' | cut -c1-80)); killing"; kill -9 "$p" 2>/dev/null; done
}
left() { echo $(( ${LIMIT:-585} - ($(date +%s) - T0) )); }

run_stage() {
  local st="$1"
  echo "== stage $st on $(nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader) $(date -u +%FT%TZ)"
  case "$st" in
  stage) bash tests/gpu/kit/stage.sh; true ;;
  install) bash tests/gpu/kit/install.sh ;;
  kernels)
    install_shim
    timeout "$(left)" "${PYT[@]}" tests/gpu/test_gpu_kernels.py ;;
  transformers)
    install_shim
    timeout "$(left)" "${PYT[@]}" tests/gpu/test_gpu_transformers_backend.py ;;
  vllm)
    need_kit || return 3; install_shim
    timeout "$(left)" "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py ${PYTEST_ARGS:-} ;;
  lsp-tiny)
    need_kit || return 3; install_shim
    GPU_LSP_MODEL=tiny timeout "$(left)" "${PYT[@]}" tests/gpu/test_gpu_lsp_vllm.py ${PYTEST_ARGS:-} ;;
  lsp-full)
    need_kit || return 3; install_shim
    GPU_LSP_MODEL="full-${LSP_FULL_DTYPE:-fp8}" timeout "$(left)" "${PYT[@]}" tests/gpu/test_gpu_lsp_vllm.py ${PYTEST_ARGS:-} ;;
  keystroke)
    need_kit || return 3; install_shim
    timeout "$(left)" python3 bench/keystroke_e2e.py --gpu-configs "${KEYSTROKE_CONFIGS:-default}" \
      --budget-s "$(( $(left) - 20 ))" --next-edit "${NEXT_EDITS:-0}" --json "$OUT/keystroke.json" --markdown "$OUT/keystroke.md" ;;
  step)
    need_kit || return 3; install_shim
    timeout "$(left)" python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:?JOBS=job1,job2}" \
      --job-timeouts "${JOB_TIMEOUTS:-}" --out "$OUT/gpu_step.jsonl" ;;
  sweep)
    install_shim
    timeout "$(left)" python3 bench/gpu_step.py --parts "${PARTS:?PARTS=floors,kernels,...}" ${ARGS:-} --out "$OUT/gpu_step.jsonl" ;;
  lean-train)
    install_shim; export PYTHONPATH="$PWD:$PYTHONPATH" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    # packs carried by this call join those earlier calls left in /tmp (a call carries at most 64 MiB with the tree)
    mkdir -p /tmp/train_data && cp -n .train_data/pack-*.jsonl.gz /tmp/train_data/ 2>/dev/null
    PACKS=$(ls /tmp/train_data/pack-*.jsonl.gz | paste -sd, -); echo "packs: $PACKS"
    [ "${LEAN_MANIFEST:-1}" = 0 ] || [ -f "/tmp/train_data/corpus-$(echo "$PACKS" | md5sum | cut -c1-8).json" ] || timeout 180 python3 -m training.corpus \
        manifest --pack "$PACKS" --out "/tmp/train_data/corpus-$(echo "$PACKS" | md5sum | cut -c1-8).json" > "$OUT/corpus.out" 2>&1
    cp "/tmp/train_data/corpus-$(echo "$PACKS" | md5sum | cut -c1-8).json" "$OUT/corpus.json" 2>/dev/null
    rm -rf /tmp/lean-next
    timeout "$(( $(left) - 40 ))" python3 -m training.lean_train ${LEAN_INIT:+--init "$LEAN_INIT"} --out /tmp/lean-next \
        --minutes "${LEAN_MIN:-8}" --workers 14 --pack "$PACKS" --log "$OUT/lean.log" \
        ${LEAN_ARGS:-} ${LEAN_PROFILE:+--profile "$OUT/lean-profile.txt"} > "$OUT/lean.out" 2>&1
    echo "lean_train exit $?"; grep -v "^\[" "$OUT/lean.out" | tail -n 20; tail -n 4 "$OUT/lean.log"
    if [ -d /tmp/lean-next ]; then
      rm -rf /tmp/lean && mv /tmp/lean-next /tmp/lean
      rm -rf /tmp/lean-int8 && mkdir /tmp/lean-int8 && cp /tmp/lean/*.json /tmp/lean/*.jinja /tmp/lean-int8/ \
        && cp /tmp/lean/model.safetensors /tmp/lean-int8/ && python3 -m dgemma_lsp.backend.int8_weights /tmp/lean-int8 \
        && rm /tmp/lean-int8/model.safetensors && tar cf - -C /tmp lean-int8 | split -b 15m - "$OUT/lean-int8.tar.part-"
    fi ;;
  *) echo "unknown stage $st (see the header of $0)"; return 2 ;;
  esac
}

rc=0
for st in "$@"; do
  run_stage "$st" 2>&1 | tee -a "$OUT/$st.log"
  r=${PIPESTATUS[0]}; echo "== stage $st: exit $r ($(( $(date +%s) - T0 )) s into the call)"
  [ "$r" -ne 0 ] && rc=$r
  reap_engines
  [ "$st" = install ] && [ "$r" -ne 0 ] && break
done
nvidia-smi --query-gpu=memory.used --format=csv,noheader
exit $rc
