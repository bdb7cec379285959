// Reference canonicaliser used by TestAgainstNode: the SharedOS algorithm as
// JavaScript runs it. Reads {"pairs": [[a, b], ...], "docs": ["<json>", ...]}
// on stdin; writes {"signs": [...], "canon": [...]} (canon entry null when
// JSON.parse rejects the document).
"use strict";
function canon(v) {
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  if (v !== null && typeof v === "object") {
    return "{" + Object.keys(v).sort((a, b) => a.localeCompare(b))
      .map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
  }
  return JSON.stringify(v);
}
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => { input += d; });
process.stdin.on("end", () => {
  const req = JSON.parse(input);
  const signs = (req.pairs || []).map(([a, b]) => Math.sign(a.localeCompare(b)));
  const out = (req.docs || []).map((d) => {
    try { return canon(JSON.parse(d)); } catch (e) { return null; }
  });
  process.stdout.write(JSON.stringify({ signs, canon: out }));
});
