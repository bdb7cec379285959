// Interop client for the bridge tests: drives a bridge with the official MCP
// TypeScript SDK and prints one JSON line per step for the Go test to check.
// Usage: node client.mjs <sdk-prefix> <url>   (token in SHAREDOS_MCP_TOKEN)
import { createRequire } from "node:module";
import { join } from "node:path";

const [prefix, url] = process.argv.slice(2);
const require = createRequire(join(prefix, "package.json"));
const { Client } = await import(require.resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StreamableHTTPClientTransport } = await import(require.resolve("@modelcontextprotocol/sdk/client/streamableHttp.js"));

const out = (step, value) => process.stdout.write(JSON.stringify({ step, ...value }) + "\n");
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.SHAREDOS_MCP_TOKEN}` } },
});
const client = new Client({ name: "ts-sdk-interop", version: "1" });
await client.connect(transport);
out("connected", { server: client.getServerVersion(), protocol: transport.protocolVersion });

const list = await client.listTools();
out("list", { names: list.tools.map((t) => t.name), meta: list._meta, toolMeta: list.tools[0]?._meta });

const call = async (step, name, args) => {
  const res = await client.callTool({ name, arguments: args });
  out(step, { isError: res.isError, text: res.content?.[0]?.text, meta: res._meta });
};
await call("allowed", "files.read", { path: ["README.md"] });
await call("denied", "files.replace", { path: ["README.md"], content: "pwned" });
await call("unknown", "shell.exec", {});

const controller = new AbortController();
const blocked = client.callTool({ name: "test.block", arguments: {} }, undefined, { signal: controller.signal });
await new Promise((r) => setTimeout(r, Number(process.env.CANCEL_AFTER_MS ?? 300)));
controller.abort();
try {
  await blocked;
  out("cancelled", { aborted: false });
} catch (e) {
  out("cancelled", { aborted: true, error: String(e?.name ?? e) });
}
await call("after-cancel", "files.list", { path: [] });
await client.close();
