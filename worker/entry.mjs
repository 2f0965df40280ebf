// revenant's Worker entry: the front (Go, worker/) and the two Durable
// Object classes, Tree (durableobject/shim.js) and Directory
// (worker/directory.mjs).
//
// The front's logic is Go: worker.Front decides every request (Host,
// Origin and path checks, route, bearer token, id form) before any object
// is touched. It runs in two ways (docs/RATIONALE.md, "Why the front's hot
// session routes skip syumai's per-request Go instance"):
//   - the hot session routes (/v1/sessions/{id}/…: snapshot, prompt,
//     interrupt, events, …) ask decide of one long-lived Go instance per
//     isolate, synchronously and with no I/O in Go, and this file does the
//     owner check and forwards; the object's answer (an event stream
//     included) is returned as it is, unbuffered;
//   - create, list and delete go to syumai's generated entry, which starts
//     a new Go instance per request and does the I/O from Go.
// REVENANT_FRONT = "syumai" sends every request through syumai's entry
// (the figures of the note compare the two).
import { Tree } from "../durableobject/shim.js"; // evaluates Go's wasm_exec.js first
import syumai from "../build/worker/worker.mjs"; // generated (make do-build); its wasm_exec.js, a superset of Go's, is evaluated last and is the Go both use
import frontModule from "../build/worker/app.wasm";
import { Directory } from "./directory.mjs";

export { Tree, Directory };

const FORWARD = 4; // worker.Forward
const TREE_HEADER = "x-revenant-tree";
const PRINCIPAL_HEADER = "x-revenant-principal";

let logic; // the isolate's long-lived front instance's binding, once started

// frontLogic starts the long-lived instance on first use. Everything here
// is synchronous (no promise crosses requests): main runs until it blocks
// in workers.Serve, having set binding.decide. null: the program ended
// (REVENANT_TOKENS malformed; its log says why).
function frontLogic(env) {
  if (logic && !logic.go.exited) return logic.binding;
  const go = new Go();
  const binding = {};
  const instance = new WebAssembly.Instance(frontModule, { ...go.importObject, workers: { ready: () => {} } });
  go.run(instance, { env, ctx: undefined, binding, connect: undefined }).catch((e) => console.error("revenant front:", e));
  if (go.exited || typeof binding.decide !== "function") return null;
  logic = { go, binding };
  return binding;
}

function json(status, body) {
  return Response.json(body, { status });
}

// forward does the owner check in the caller's directory, then sends the
// request to the tree's object with the front's headers.
async function forward(request, env, d) {
  const dir = env.DIRECTORIES.get(env.DIRECTORIES.idFromName("principal:" + d.principal));
  const owned = await dir.fetch("https://object/trees/" + d.root);
  await owned.body?.cancel();
  if (owned.status === 404) return json(404, { error: { type: "not_found", message: "no such session" } });
  if (owned.status !== 200) return json(503, { error: { type: "unavailable", message: "the session directory did not answer; try again" } });
  const headers = new Headers(request.headers);
  headers.delete("authorization");
  headers.set(TREE_HEADER, d.root); // replaces any copy a client sent
  headers.set(PRINCIPAL_HEADER, d.principal);
  const body = request.method === "GET" || request.method === "HEAD" ? undefined : request.body;
  const stub = env.TREES.get(env.TREES.idFromName(d.root));
  return stub.fetch(new Request("https://object" + d.url, { method: request.method, headers, body }));
}

export default {
  async fetch(request, env, ctx) {
    if (env.REVENANT_FRONT !== "syumai") {
      const front = frontLogic(env);
      if (!front) return json(500, { error: { type: "internal", message: "the front did not start; see the Worker's log" } });
      const d = front.decide(request.method, request.url, [...request.headers]);
      if (d.status !== undefined) return new Response(d.body, { status: d.status, headers: d.headers });
      if (d.kind === FORWARD) return forward(request, env, d);
    }
    return syumai.fetch(request, env, ctx);
  },
};
