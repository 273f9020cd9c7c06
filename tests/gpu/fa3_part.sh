#!/usr/bin/env bash
# FlashAttention-3's kernels for the plugin's `attention` piece on the H200: the device kit
# (../shared/device/build-vllm-kit.sh) strips them from the vLLM 0.26 wheel to fit its parts, so this ships
# `vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so` (153 MB) from the same wheel, xz-compressed (11 MB) and cut in three
# pieces (.kit4/fa3.xz.aa .ab .ac, ignored) so that each rides with one kit part inside a run's 64 MiB.
#   here:    bash tests/gpu/fa3_part.sh            (after build-vllm-kit.sh: reuses its downloaded wheel)
#   device:  runs A11 / B11 / C11 of run_device.sh carry one piece each beside .kit1 / .kit2 / .kit3; C11 joins
#            them into /tmp/site after installing vLLM (`fa3_install`).
set -euo pipefail
ROOT="$(git rev-parse --show-toplevel)"
WHL="${KIT_WORK:-/tmp/vllm-kit-build}/dl/vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl"
[ -f "$WHL" ] || { echo "no $WHL: run bash ../shared/device/build-vllm-kit.sh first"; exit 2; }
rm -rf "$ROOT/.kit4" && mkdir -p "$ROOT/.kit4"
python3 - "$WHL" "$ROOT/.kit4" <<'PY'
import lzma, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
data = zipfile.ZipFile(whl).read("vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so")
packed = lzma.compress(data, preset=6)
cut = -(-len(packed) // 3)
for i, name in enumerate(("aa", "ab", "ac")):
    with open(f"{out}/fa3.xz.{name}", "wb") as f:
        f.write(packed[i * cut : (i + 1) * cut])
print(f"fa3: {len(data) / 1e6:.1f} MB, xz {len(packed) / 1e6:.1f} MB in 3 pieces")
PY
grep -qx '/.kit\*/' "$ROOT/.git/info/exclude" 2>/dev/null || printf '/.kit*/\n' >> "$ROOT/.git/info/exclude"
du -sh "$ROOT/.kit4"
