#!/usr/bin/env bash
# On the device: stage what this call carried, then (every piece staged and checked) unpack the kit and install it
# into /tmp/site (KIT=0.33 / 0.34: /tmp/site-$KIT, so kits can sit side by side on one warm machine). KIT=0.26
# (default): the wheels, FlashAttention-3's kernels into vLLM's package. KIT=0.33 / 0.34: the site tree (torch 2.14,
# vLLM 0.33 or 0.34 and the rest, unpacked at build time) straight from its xz tar.
# Idempotent while the machine is warm. Then `export PYTHONPATH=$SITE` (run_device.sh does) and check what
# imports (0.33 / 0.34: check_kit_torch214.py also runs sm_90 code of torch, cuDNN, vLLM and triton).
set -uo pipefail
D="$(cd "$(dirname "$0")" && pwd)"
KIT="${KIT:-0.26}"
KP=/tmp/kp SITE=/tmp/site; [ "$KIT" = 0.26 ] || { KP="/tmp/kp-$KIT"; SITE="/tmp/site-$KIT"; }
export SITE
check() {
  if [ "$KIT" != 0.26 ]; then
    PYTHONPATH="$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages" python3 "$D/check_kit_torch214.py"; return $?
  fi
  PYTHONPATH=$SITE python3 - <<'PY'
import importlib, os, sys
bad = []
for m in ("vllm", "compressed_tensors", "pygls", "lsprotocol", "pytest_lsp", "pytest_asyncio", "json_repair"):
    try:
        importlib.import_module(m)
    except Exception as exc:
        bad.append(f"{m} ({type(exc).__name__}: {exc})")
import vllm
fa3 = os.path.join(os.path.dirname(vllm.__file__), "vllm_flash_attn", "_vllm_fa3_C.abi3.so")
if not os.path.exists(fa3):
    bad.append("FlashAttention-3 kernels")
print(f"kit: vllm {vllm.__version__} in {os.environ['SITE']}; " + (f"MISSING: {', '.join(bad)}" if bad else "all parts import"))
sys.exit(1 if bad else 0)
PY
}
if [ -f $SITE/.kit-installed ]; then
  have=$(cat $SITE/.kit-installed); have=${have:-0.26}
  [ "$have" = "$KIT" ] || { echo "kit: $SITE holds kit $have, not $KIT (a fresh machine installs another)"; exit 3; }
  check; exit $?
fi
bash "$D/stage.sh" || { echo "kit: not installed (pieces missing: stage them first, within ~30 s of each other)"; exit 3; }
want=$(awk '$1 == "tar" {print $2}' "$KP/MANIFEST")
if [ "$KIT" != 0.26 ]; then
  s=$(date +%s)
  cat "$KP"/kit.part.* > /tmp/kit.tar.xz
  [ "$(sha256sum /tmp/kit.tar.xz | cut -d' ' -f1)" = "$want" ] || { echo "kit: joined tar does not match its sha256"; exit 3; }
  rm -rf $SITE && mkdir -p $SITE
  if command -v xz >/dev/null; then xz -dc -T0 /tmp/kit.tar.xz | tar xf - -C $SITE
  else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer, 1 << 20)' \
         /tmp/kit.tar.xz | tar xf - -C $SITE; fi
  r=$?; rm -f /tmp/kit.tar.xz
  [ $r -eq 0 ] || { echo "kit: unpacking failed"; exit 3; }
  echo "kit $KIT: unpacked $(du -sm $SITE | cut -f1) MB into $SITE in $(( $(date +%s) - s )) s"
  check && echo "$KIT" > $SITE/.kit-installed
  exit $?
fi
cat "$KP"/kit.part.* > /tmp/kit.tar
[ "$(sha256sum /tmp/kit.tar | cut -d' ' -f1)" = "$want" ] || { echo "kit: joined tar does not match its sha256"; exit 3; }
rm -rf /tmp/kitw && mkdir -p /tmp/kitw && tar xf /tmp/kit.tar -C /tmp/kitw && rm -f /tmp/kit.tar
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE \
  /tmp/kitw/wheels/*.whl 2>&1 | grep -v "RECORD line\|Running pip as\|WARNING: Target directory" || true
python3 - <<'PY'
import lzma, os, sys
sys.path.insert(0, os.environ["SITE"])
import vllm
dst = os.path.join(os.path.dirname(vllm.__file__), "vllm_flash_attn", "_vllm_fa3_C.abi3.so")
open(dst, "wb").write(lzma.decompress(open("/tmp/kitw/fa3.so.xz", "rb").read()))
PY
rm -rf /tmp/kitw
check && touch $SITE/.kit-installed
