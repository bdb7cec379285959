// Package scriptedmodel owns the scripted model server: the offline stand-in for a
// model provider that lets a real coding-agent CLI (Claude Code, Codex, Pi) run one
// turn with its real MCP client and tool router, while the model's choices come from
// a script.
//
// A Script is a list of tool calls by canonical catalogue name (files.read, …) and a
// final text. The server speaks the three wire APIs the harnesses use — Anthropic
// Messages (SSE and JSON, plus count_tokens), OpenAI Responses (SSE and JSON) and
// OpenAI Chat Completions (SSE and JSON) — and GET /v1/models.
//
// The server keeps no conversation state: the step a request gets is the number of
// tool results already in its conversation, so a harness that retries, resends or
// runs several turns in parallel still sees a coherent script. After the last step it
// answers with the final text.
//
// For each step the server looks, among the tools the request offers, for the name
// this harness uses for the canonical tool, in this order (first match wins):
//
//  1. the canonical name itself (files.read), flat;
//  2. its portable form, dots to underscores (files_read), flat;
//  3. mcp__<server>__<portable>, then mcp__<server>__<canonical> (Claude Code, Pi native);
//  4. Codex's namespaced tool: namespace mcp__<server>, name <canonical> or <portable>;
//  5. pi-mcp-adapter's direct tool <server>_<portable>, then <server>_<canonical>;
//  6. pi-mcp-adapter's proxy tool mcp, called as mcp({tool:"<server>_<portable>", args}),
//     args as an object, or as a JSON string when the proxy's schema types args a string;
//  7. Codex code mode's freeform exec tool, called with JavaScript
//     `await tools.mcp__<server>__<portable>(args)`.
//
// ("Flat" includes Codex's default namespace, functions.) Routes 6 and 7 reach tools
// the request does not list by name, so a step resolved through them counts as
// offered. When no route exists the model still asks, by the best-guess name
// mcp__<server>__<portable>, so the harness's own refusal of an unknown tool can be
// observed; the request log records Offered=false and Via="not-offered".
//
// A step marked local ({"tool":"Bash","local":true,…}) names a harness-local tool: it
// is emitted by exactly that name, whether offered or not (the log says which), for
// the "the model asks for the harness's own shell" tests.
//
// A request that offers no tools at all, before the script's end, is taken for a side
// request (title generation, a quota probe) and answered with SideText rather than a
// call no harness could route; the log shows Reply="side_text" and the empty offer.
//
// Every request is recorded (RequestLog): the tools offered, the step chosen, the
// harness-facing name emitted and whether it was offered. That record is how the
// launcher proves what the harness showed the model.
package scriptedmodel
