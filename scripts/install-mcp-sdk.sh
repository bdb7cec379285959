#!/usr/bin/env bash
# Installs the pinned MCP TypeScript SDK (testdata/mcp-ts-client/package-lock.json)
# into .deps/mcp-ts-client, for the bridge's interop tests. Idempotent: does nothing
# when the installed lockfile already matches.
set -euo pipefail
cd "$(dirname "$0")/.."
src=testdata/mcp-ts-client
dest=.deps/mcp-ts-client
command -v npm >/dev/null || { echo "install-mcp-sdk: npm is not installed (Node 20 and npm are needed)" >&2; exit 1; }
if [ -f "$dest/package-lock.json" ] && cmp -s "$src/package-lock.json" "$dest/package-lock.json" \
   && [ -d "$dest/node_modules/@modelcontextprotocol/sdk" ]; then
  exit 0
fi
mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
echo "install-mcp-sdk: installed $(node -p "require('./$dest/node_modules/@modelcontextprotocol/sdk/package.json').version") into $dest"
