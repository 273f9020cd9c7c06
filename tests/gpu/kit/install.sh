#!/usr/bin/env bash
# On the device: stage what this call carried, then (every piece staged and checked) unpack the kit and install it
# into /tmp/site: the wheels, FlashAttention-3's kernels into vLLM's package. Idempotent while the machine is warm.
# Then `export PYTHONPATH=/tmp/site` (run_device.sh does) and check what imports.
set -uo pipefail
D="$(cd "$(dirname "$0")" && pwd)"
check() {
  PYTHONPATH=/tmp/site python3 - <<'PY'
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
print(f"kit: vllm {vllm.__version__} in /tmp/site; " + (f"MISSING: {', '.join(bad)}" if bad else "all parts import"))
sys.exit(1 if bad else 0)
PY
}
if [ -f /tmp/site/.kit-installed ]; then check; exit $?; fi
bash "$D/stage.sh" || { echo "kit: not installed (pieces missing: stage them first, within ~30 s of each other)"; exit 3; }
cat /tmp/kp/kit.part.* > /tmp/kit.tar
want=$(awk '$1 == "tar" {print $2}' /tmp/kp/MANIFEST)
[ "$(sha256sum /tmp/kit.tar | cut -d' ' -f1)" = "$want" ] || { echo "kit: joined tar does not match its sha256"; exit 3; }
rm -rf /tmp/kitw && mkdir -p /tmp/kitw && tar xf /tmp/kit.tar -C /tmp/kitw && rm -f /tmp/kit.tar
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  /tmp/kitw/wheels/*.whl 2>&1 | grep -v "RECORD line\|Running pip as\|WARNING: Target directory" || true
python3 - <<'PY'
import lzma, os, sys
sys.path.insert(0, "/tmp/site")
import vllm
dst = os.path.join(os.path.dirname(vllm.__file__), "vllm_flash_attn", "_vllm_fa3_C.abi3.so")
open(dst, "wb").write(lzma.decompress(open("/tmp/kitw/fa3.so.xz", "rb").read()))
PY
rm -rf /tmp/kitw
check && touch /tmp/site/.kit-installed
