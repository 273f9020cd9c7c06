#!/bin/sh
# Build the VS Code extension as editors/vscode/dgemma-lsp.vsix (npm ci + tsc + vsce, all from the lock file).
# Needs Node 20 + npm. Then: code --install-extension editors/vscode/dgemma-lsp.vsix
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
npm run --silent package
echo "built $(pwd)/dgemma-lsp.vsix; install it with: code --install-extension $(pwd)/dgemma-lsp.vsix"
