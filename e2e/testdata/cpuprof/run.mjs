// A CPU profile of revenant's Durable Object over warm turns, through
// wrangler's inspector (Chrome DevTools protocol); a test-only tool, not
// shipped and not run by any test. docs/RATIONALE.md ("Where does a warm
// turn's time go") has what it found. Build an object without -s -w (so
// Go's function names stay), then, from the repository root:
//
//	make do-build BUILD=/tmp/prof/build   # then rebuild the Worker's program without -ldflags:
//	GOOS=js GOARCH=wasm go build -trimpath -o /tmp/prof/build/revenant.wasm ./cmd/worker
//	(copy worker/*.mjs, durableobject/*.js and *.mjs under /tmp/prof as e2e's buildObject does,
//	 and a wrangler.toml without [build] whose main is /tmp/prof/worker/entry.mjs)
//	CONFIG=/tmp/prof/wrangler.toml N=40 node e2e/testdata/cpuprof/run.mjs
//
// It also prints the CPU time (user + system, from /proc) each process
// of wrangler's group took per profiled turn: unlike the profile's
// samples, which are wall time, that does not grow when other work on a
// busy machine holds the core.
//
// PROFILE=off runs the same turns without the profiler (the CPU figures only).
//
// WORDS=200 makes the fake model's answer that many words (its usual
// answer repeated), one streamed chunk each: the per-chunk path's share.
//
// It starts its own fake OpenAI-compatible model and wrangler dev (its
// own process group, killed at the end) on loopback ports, runs 5 turns
// to warm up and N profiled, and prints self time per kind (Go in the
// object, native, JS glue, idle) and the functions with the most.
import http from "node:http";
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";

const require = createRequire(process.cwd() + "/node_modules/");
const WebSocket = require("ws"); // wrangler's dependency
const N = Number(process.env.N ?? 40);
const CONFIG = process.env.CONFIG;
const PORT = Number(process.env.PORT ?? 8899);
const INSPECTOR = Number(process.env.INSPECTOR ?? 9333);
const PROFILE = process.env.PROFILE !== "off"; // off: the CPU figures only, without the profiler's own cost
const WORDS = Number(process.env.WORDS ?? 0); // 0: the answer as it is (7 chunks for these prompts)
const STATE = fs.mkdtempSync("/tmp/cpuprof-");
if (!CONFIG) throw new Error("CONFIG: a wrangler.toml without [build]");

const model = http.createServer((req, res) => {
  let b = "";
  req.on("data", (c) => (b += c));
  req.on("end", () => {
    const text = JSON.parse(b).messages.filter((m) => m.role === "user").at(-1).content;
    res.writeHead(200, { "content-type": "text/event-stream" });
    let words = ("You said: " + text + (WORDS > 0 ? " " : "")).split(/(?<= )/);
    while (WORDS > 0 && words.length < WORDS) words = words.concat(words);
    if (WORDS > 0) words = words.slice(0, WORDS);
    for (const w of words) {
      res.write(`data: {"choices":[{"index":0,"delta":{"content":${JSON.stringify(w)}}}]}\n\n`);
    }
    res.end('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n');
  });
});
await new Promise((r) => model.listen(0, "127.0.0.1", r));

const args = ["wrangler", "dev", "-c", CONFIG, "--ip", "127.0.0.1", "--port", String(PORT), "--inspector-port", String(INSPECTOR),
  "--persist-to", STATE, "--show-interactive-dev-session=false",
  "--var", `OPENAI_BASE_URL:http://127.0.0.1:${model.address().port}/v1`, "--var", "REVENANT_MODEL:fake"];
const env = { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false", WRANGLER_SEND_ERROR_REPORTS: "false", CI: "1", NO_COLOR: "1" };
const w = spawn("node_modules/.bin/wrangler", args.slice(1), { detached: true, env }); // its own process group; not npx (its own start)
let out = "";
w.stdout.on("data", (d) => (out += d));
w.stderr.on("data", (d) => (out += d));
const stop = () => {
  try {
    process.kill(-w.pid, "SIGKILL");
  } catch {}
  model.close();
};
process.on("exit", stop);
const deadline = Date.now() + 60_000; // wrangler is an external process: poll its output with a deadline
while (!out.includes("Ready on")) {
  if (Date.now() > deadline) throw new Error("wrangler did not start:\n" + out);
  await new Promise((r) => setTimeout(r, 100));
}

// groupCPU reads the CPU time in ms (user + system) of each live process
// in process group pgid, keyed "name pid".
function groupCPU(pgid) {
  const tick = 1000 / 100; // USER_HZ is 100 on Linux
  const out = new Map();
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // ended since the listing
    }
    const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // f[0] is field 3 (state)
    if (Number(f[2]) !== pgid) continue;
    out.set(`${name} ${pid}`, (Number(f[11]) + Number(f[12])) * tick);
  }
  return out;
}

const base = `http://127.0.0.1:${PORT}`;
const call = async (method, path, body) =>
  (await fetch(base + path, { method, headers: { "content-type": "application/json" }, body: body && JSON.stringify(body) })).json();
const { id } = await call("POST", "/v1/sessions", {});
const { cursor } = await call("GET", `/v1/sessions/${id}`);
const reader = (await fetch(`${base}/v1/sessions/${id}/events?after=${cursor}`)).body.getReader();
const dec = new TextDecoder();
let buf = "";
async function turnEnd(pid) {
  for (;;) {
    const i = buf.indexOf("\n\n");
    if (i >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (frame.includes(pid) && /execution\.(succeeded|failed)/.test(frame)) return frame;
      continue;
    }
    const { value, done } = await reader.read();
    if (done) throw new Error("the event stream ended");
    buf += dec.decode(value, { stream: true });
  }
}
async function turn(text) {
  const t0 = performance.now();
  const { prompt_id: pid } = await call("POST", `/v1/sessions/${id}/prompt`, { text });
  const admitted = performance.now() - t0;
  const frame = await turnEnd(pid);
  if (!frame.includes("succeeded")) throw new Error(frame);
  return [admitted, performance.now() - t0];
}
for (let i = 0; i < 5; i++) await turn("warm up " + i);

const [target] = await (await fetch(`http://127.0.0.1:${INSPECTOR}/json`)).json();
const ws = new WebSocket(target.webSocketDebuggerUrl);
await new Promise((r) => ws.on("open", r));
let seq = 0;
const pending = new Map();
ws.on("message", (m) => {
  const d = JSON.parse(m);
  pending.get(d.id)?.(d);
  pending.delete(d.id);
});
const cdp = (method, params = {}) =>
  new Promise((r) => {
    pending.set(++seq, r);
    ws.send(JSON.stringify({ id: seq, method, params }));
  });
await cdp("Profiler.enable");
await cdp("Profiler.setSamplingInterval", { interval: 100 });
await cdp("Profiler.start");
const times = [];
const cpu0 = groupCPU(w.pid);
for (let i = 0; i < N; i++) times.push(await turn("warm prompt " + i));
const cpu1 = groupCPU(w.pid);
const { result } = await cdp("Profiler.stop");
fs.writeFileSync(STATE + "/turns.cpuprofile", JSON.stringify(result.profile)); // opens in Chrome DevTools
stop();

const p50 = (a) => a.slice().sort((x, y) => x - y)[Math.ceil(a.length / 2) - 1];
console.log(`${N} turns: prompt → 202 p50 ${p50(times.map((t) => t[0])).toFixed(1)} ms, → turn end p50 ${p50(times.map((t) => t[1])).toFixed(1)} ms`);
const prof = result.profile;
const nodes = new Map(prof.nodes.map((n) => [n.id, n]));
const kind = (n) => {
  const url = n.callFrame.url;
  if (!url) return n.callFrame.functionName.startsWith("(") ? n.callFrame.functionName : "native";
  return url.includes(".") ? "js" : "wasm " + url; // a wasm module's url is its hash (the object's and the front's)
};
const byKind = new Map();
const byFunc = new Map();
prof.samples.forEach((s, i) => {
  const d = prof.timeDeltas[i] ?? 0;
  const n = nodes.get(s);
  byKind.set(kind(n), (byKind.get(kind(n)) ?? 0) + d);
  const f = `${n.callFrame.functionName || "(anonymous)"} ${kind(n)}`;
  byFunc.set(f, (byFunc.get(f) ?? 0) + d);
});
const show = (m, k) =>
  [...m].sort((a, b) => b[1] - a[1]).slice(0, k).forEach(([name, us]) => console.log(`${(us / 1000 / N).toFixed(2).padStart(8)} ms/turn  ${name}`));
console.log("CPU (user + system) by process:");
for (const [key, t] of cpu1) console.log(`${((t - (cpu0.get(key) ?? 0)) / N).toFixed(2).padStart(8)} ms/turn  ${key}`);
console.log("self time by kind:");
show(byKind, 10);
console.log("self time by function:");
show(byFunc, 40);
console.log("profile:", STATE + "/turns.cpuprofile");
process.exit(0);
