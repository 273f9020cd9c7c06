#!/usr/bin/env bash
# On the device: stage what this call carried, then (every piece staged and checked) unpack the kit and install it
# into /tmp/site-$KIT (KIT=0.34 by default or 0.33, so kits can sit side by side on one warm machine): the site tree
# (torch 2.14, vLLM 0.33 or 0.34 and the rest, unpacked at build time) straight from its xz tar.
# Idempotent while the machine is warm. Then `export PYTHONPATH=$SITE` (run_device.sh does) and check what imports
# (check_kit_torch214.py also runs sm_90 code of torch, cuDNN, vLLM and triton).
set -uo pipefail
D="$(cd "$(dirname "$0")" && pwd)"
KIT="${KIT:-0.34}"
KP="/tmp/kp-$KIT" SITE="/tmp/site-$KIT"
export SITE KIT  # KIT: the versions check_kit_torch214.py expects
check() {
  PYTHONPATH="$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages" python3 "$D/check_kit_torch214.py"
}
if [ -f $SITE/.kit-installed ]; then
  have=$(cat $SITE/.kit-installed)
  [ "$have" = "$KIT" ] || { echo "kit: $SITE holds kit $have, not $KIT (a fresh machine installs another)"; exit 3; }
  check; exit $?
fi
bash "$D/stage.sh" || { echo "kit: not installed (pieces missing: stage them first, within ~30 s of each other)"; exit 3; }
want=$(awk '$1 == "tar" {print $2}' "$KP/MANIFEST")
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
