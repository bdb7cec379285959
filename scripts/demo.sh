#!/usr/bin/env bash
# The demo of what exists today: build sharedos-run, show the managed catalogue of the
# default configuration, then run a command in the sandbox whose only way to act is
# that catalogue — a tiny MCP client made of curl — and show what the bridge recorded.
# Needs root (the sandbox), curl and Go; installs curl with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v curl >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl
  else
    echo "demo: curl is needed (apt-get install curl)" >&2; exit 1
  fi
fi
make -s build
bin=./bin/sharedos-run
ws=$(mktemp -d "$PWD/.demo-ws-XXXXXX")
out=$(mktemp)
trap 'rm -rf "$ws" "$out"' EXIT
cp -r testdata/example/workspace/. "$ws/"

echo "== the catalogue a turn would get (default configuration, workspace $ws)"
"$bin" catalog --workspace "$ws"
echo
echo "== a command in the sandbox, acting only through the bridge"
"$bin" exec --workspace "$ws" --read-only --outcome "$out" --env "WS=$ws" -- sh -c '
post() { curl -sS -H "Authorization: Bearer $SHAREDOS_MCP_TOKEN" -H "Content-Type: application/json" \
  -H "Accept: application/json, text/event-stream" ${SID:+-H "Mcp-Session-Id: $SID"} "$@" "$SHAREDOS_MCP_URL"; }
SID=$(post -D - -o /dev/null --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"demo\",\"version\":\"0\"}}}" | tr -d "\r" | sed -n "s/^[Mm]cp-[Ss]ession-[Ii]d: //p")
post --data "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"
echo "files.read README.md    -> $(post --data "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"files.read\",\"arguments\":{\"path\":[\"README.md\"]}}}" | cut -c1-160)"
echo "files.replace README.md -> $(post --data "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"files.replace\",\"arguments\":{\"path\":[\"README.md\"],\"content\":\"x\"}}}" | cut -c1-160)"
(echo x > "$WS/README.md") 2>/dev/null && echo "direct write           -> WORKED (breach)" || echo "direct write           -> refused (read-only file system)"
curl -sS -m 2 -o /dev/null http://example.com/ 2>/dev/null && echo "network                -> WORKED (breach)" || echo "network                -> refused (no route out of the sandbox)"
'
echo
echo "== what the bridge recorded"
python3 - "$out" <<'PY' 2>/dev/null || cat "$out"
import json, sys
d = json.load(open(sys.argv[1]))
b = d["bridge"]
print(f"executionId {b['executionId']}  catalogHash {b['catalogHash']}  policyHash {b['policyHash']}")
for e in b["events"]:
    if e["kind"] == "call":
        print(f"  call {e['tool']:<16} {e['decision']:<10} {e.get('code','')}")
print(f"exit {d['exitCode']}, cgroup {d['cgroupMode']}, peak memory {d['stats']['peakMemory']} B, violations {len(d['violations'])}")
PY
