#!/usr/bin/env bash
# On the device: park the kit pieces this call carried (.kit/part*/) in /tmp/kp, where they survive to the next
# call while the machine stays warm (~30 s), and say at once which pieces are here and which are still missing.
# Exit 0 when every piece is staged, 4 while some are missing, 2 when no manifest is known.
set -uo pipefail
mkdir -p /tmp/kp
for d in .kit/part*/; do
  [ -d "$d" ] || continue
  cp "$d"/kit.part.* "$d"/MANIFEST /tmp/kp/ 2>/dev/null
done
[ -f /tmp/kp/MANIFEST ] || { echo "kit: no piece staged and none carried (carry .kit/part1 first)"; exit 2; }
have=() missing=() bad=()
while read -r what name sum; do
  [ "$what" = piece ] || continue
  if [ ! -f "/tmp/kp/$name" ]; then missing+=("$name")
  elif [ "$(sha256sum "/tmp/kp/$name" | cut -d' ' -f1)" != "$sum" ]; then bad+=("$name"); rm -f "/tmp/kp/$name"
  else have+=("$name"); fi
done < /tmp/kp/MANIFEST
echo "kit pieces staged: ${have[*]:-none}; missing: ${missing[*]:-none}${bad:+; corrupt (removed): ${bad[*]}}"
[ ${#missing[@]} -eq 0 ] && [ ${#bad[@]} -eq 0 ] && exit 0
exit 4
