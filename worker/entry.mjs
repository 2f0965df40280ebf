// revenant's Worker entry: the front (Go, worker/) and the two Durable
// Object classes, Tree (durableobject/shim.js) and Directory
// (worker/directory.mjs).
//
// The front's logic is Go: worker.Front decides every request (Host,
// Origin and path checks, route, bearer token, id form, a list's limit and
// cursor) before any object is touched. It runs in one long-lived Go
// instance per isolate (docs/RATIONALE.md, "Why is the front one Go
// instance per isolate, without syumai/workers?"), of the same
// WebAssembly.Module as the Tree objects' (build/revenant.wasm, cmd/worker)
// in its "front" role. Its entry points are synchronous and do no I/O
// (decide; create checks the body and mints the id; page shapes a list);
// this file does the I/O they decide on: the owner check (cached once
// positive), the tree's object, the directory. The object's answer (an
// event stream included) is returned as it is, unbuffered. A create's and
// a delete's steps (the tree's object, then the directory) outlive a
// client that goes away (ctx.waitUntil: lasting).
import { SPENT_HEADER, Tree, goModule, varText } from "../durableobject/shim.js"; // evaluates Go's wasm_exec.js first
import { drop, readBody } from "../durableobject/body.mjs";
import { Directory, FAIL_ONCE_HEADER, LOSE_PUT_HEADER } from "./directory.mjs";
import { armHold, disarm } from "../durableobject/testhold.mjs";

export { Tree, Directory };

const CREATE = 1; // worker.Create
const LIST = 2; // worker.List
const DELETE = 3; // worker.Delete
const FORWARD = 4; // worker.Forward
const TREE_HEADER = "x-revenant-tree";
const PRINCIPAL_HEADER = "x-revenant-principal";
const CREATED_AT_HEADER = "x-revenant-created-at"; // durableobject.CreatedAtHeader
const CUT_HEADER = "x-revenant-test-cut"; // the tests' build: cut

const BRIDGES = "__revenantBridges"; // cmd/worker's bridgesVar

let logic; // the isolate's long-lived front instance ({go, bridge}), once started
let nextFront = 0; // names each start's bridge

// owned remembers "principal\nroot" pairs the caller's directory
// confirmed, so a session's later requests skip the directory's round
// trip. Only positive answers are kept, and a tree's owner never changes;
// a delete through this isolate forgets its pair. Another isolate's stale
// pair reaches a deleted tree's object, which answers 404 without writing
// or booting a tree (its storage is gone: durableobject/shim.js), the
// answer the directory would give. REVENANT_OWNER_CACHE: "off" asks the
// directory every time; "stale" never forgets, to reach that case from
// one isolate, and only the tests' build honours it (the front's
// testBuild): elsewhere it is "on".
const owned = new Set();
const OWNED_MAX = 10000; // pairs kept before the set starts over

function ownerCache(env) {
  const mode = env.REVENANT_OWNER_CACHE ?? "on";
  if (mode === "stale" && !logic?.bridge.testBuild) return "on";
  return mode;
}

// frontLogic starts the long-lived instance on first use: the Worker's Go
// program (the same module as the Tree objects') in its "front" role,
// given the token list, the allowed browser origins and the settings (for
// the body cap). Everything here is synchronous (no promise crosses
// requests): main runs until it blocks in worker.Serve, having set
// decide, create and page on the bridge. null: the program ended (one of
// those malformed; its log says why).
function frontLogic(env) {
  if (logic && !logic.go.exited) return logic.bridge;
  const key = `front${nextFront++}`;
  const bridge = {};
  globalThis[BRIDGES] ??= {};
  globalThis[BRIDGES][key] = bridge;
  const go = new Go();
  go.argv = ["revenant", "front"];
  go.env = { REVENANT_BRIDGE: key };
  for (const name of ["REVENANT_TOKENS", "REVENANT_ALLOWED_ORIGINS", "REVENANT_SETTINGS"]) go.env[name] = varText(env, name) ?? "";
  try {
    const instance = new WebAssembly.Instance(goModule, go.importObject);
    go.run(instance).catch((e) => console.error("revenant front:", e));
  } finally {
    delete globalThis[BRIDGES][key];
  }
  if (go.exited || typeof bridge.decide !== "function") return null;
  logic = { go, bridge };
  return bridge;
}

// json answers as the Go API's writeJSON does: the JSON and a newline.
function json(status, body) {
  const headers = { "content-type": "application/json", "x-content-type-options": "nosniff", "cache-control": "no-store" };
  return new Response(JSON.stringify(body) + "\n", { status, headers });
}

function answer(d) {
  return new Response(d.body, { status: d.status, headers: d.headers });
}

// withHeaders adds the decision's headers (the CORS headers of an allowed
// Origin, as the local server sets them before any handler) to an answer,
// an object's streamed one included: its body passes on as it is.
function withHeaders(res, pairs) {
  if (!pairs?.length) return res;
  const out = new Response(res.body, res);
  for (const [name, value] of pairs) out.headers.set(name, value);
  return out;
}

// Request bodies are capped at the decision's maxBody (the API's max_body,
// 1 MiB by default) and never read past one byte over it
// (durableobject/body.mjs). A body that declares a larger Content-Length
// is refused unread (decision.tooLarge).

// refuseTooLarge answers a body declared over the cap; the body is dropped.
function refuseTooLarge(request, d) {
  if (request.body) drop(request.body.getReader());
  return answer(d.tooLarge);
}

// ignoreBody reads a body no route uses and throws it away, while the
// request is answered; stop, once the answer is in hand, gives the client
// UNREAD_GRACE_MS more to finish it, then gives up the rest unread, so a
// body held back holds the answer that long at most. Given up at once
// instead (drop), a body the client sent whole was often taken for a
// failed request under wrangler dev, whose proxy then answered 503 "Your
// worker restarted mid-request" in the Worker's place (interrupts with
// the body {} on fresh connections: 5 to 10 in 40; none when read to its
// end). Nothing read is kept: the body costs no memory, however long.
function ignoreBody(reader) {
  let ended = false;
  const drained = (async () => {
    try {
      while (!(await reader.read()).done);
    } catch {
      // The upload broke off: nothing is left to give up.
    }
    ended = true;
  })();
  return {
    async stop() {
      if (ended) return;
      let timer;
      await Promise.race([drained, new Promise((resolve) => (timer = setTimeout(resolve, UNREAD_GRACE_MS)))]);
      clearTimeout(timer);
      if (!ended) drop(reader);
    },
  };
}

// UNREAD_GRACE_MS is how long an answer waits for the rest of a body it
// does not read (ignoreBody), as the local server's connection does for
// such a body after its answer (cmd/revenant's unreadGrace).
const UNREAD_GRACE_MS = 500;

// clientBody is readBody for a body the front reads before any object
// sees it, or null when the client's upload broke off (its connection
// closed before the declared length, a malformed chunk): the client's
// doing, so the answer is unreadBody's 400, as on the local server, not
// the 503 and the error log of an object that failed (serve's catch).
async function clientBody(request, max) {
  try {
    return await readBody(request, max);
  } catch (e) {
    console.warn("revenant front: the request body could not be read (the client's upload broke off):", String(e));
    return null;
  }
}

const unreadBody = () => json(400, { error: { type: "invalid_request", message: "could not read the request body" } });

const unavailable = () => json(503, { error: { type: "unavailable", message: "the session's object did not answer; try again" } });

// treeFetch sends a request to tree root's object (through sendToTree
// only, which never passes on an answer with SPENT_HEADER) with the front's
// headers: the client's Authorization and every x-revenant-* header it
// sent are dropped (the object reads the tree and principal the front
// sets; no other of the namespace is the client's to give).
function treeFetch(env, root, principal, method, path, clientHeaders, body) {
  const headers = new Headers(clientHeaders);
  for (const name of [...headers.keys()]) {
    if (name.startsWith("x-revenant-")) headers.delete(name);
  }
  headers.delete("authorization");
  headers.delete("content-length");
  headers.set(TREE_HEADER, root);
  // Percent-encoded: a principal may be any text REVENANT_TOKENS names,
  // and a header value is bytes (workerd passes non-ASCII only by a quirk).
  headers.set(PRINCIPAL_HEADER, encodeURIComponent(principal));
  const stub = env.TREES.get(env.TREES.idFromName(root));
  return stub.fetch(new Request("https://object" + path, { method, headers, body }));
}

// directoryFetch sends a request to the caller's Directory. A Directory
// whose storage failed throws (sql.exec does), which rejects this fetch:
// that is answered as a status, 502, like any other failed answer, so that
// every caller answers its client with the directory's 503
// (directoryUnavailable), never the 503 of serve's catch, which names the
// session's object (a list reaches no object at all).
async function directoryFetch(env, principal, method, path) {
  try {
    return await env.DIRECTORIES.get(env.DIRECTORIES.idFromName("principal:" + principal)).fetch(
      "https://object" + path, { method, headers: directoryTestHeaders(env, method, path) });
  } catch (e) {
    console.error("revenant front: the directory's fetch failed", method, path.split("?")[0], String(e));
    return new Response(null, { status: 502 });
  }
}

// directoryTestHeaders are the headers of a Directory request: none but
// in the tests' build.
function directoryTestHeaders(env, method, path) {
  const headers = {};
  // The tests' build only (the front's testBuild): the var
  // REVENANT_TEST_LOSE_PUT has the Directory lose its answer to a PUT it
  // committed ("on") or land a PUT late ("late"),
  // REVENANT_TEST_FAIL_OWNER_READ fail a tree's first owner read,
  // REVENANT_TEST_FAIL_ROW_DELETE its row's first DELETE (every one:
  // "always"), REVENANT_TEST_FAIL_KEY_READ a key's first read ("miss":
  // the first that finds it, answered not found) and
  // REVENANT_TEST_FAIL_LIST its first list (directory.mjs).
  if (logic?.bridge.testBuild) {
    if (method === "PUT" && env.REVENANT_TEST_LOSE_PUT) headers[LOSE_PUT_HEADER] = env.REVENANT_TEST_LOSE_PUT;
    if (method === "GET" && path.startsWith("/trees/") && env.REVENANT_TEST_FAIL_OWNER_READ) headers[FAIL_ONCE_HEADER] = "1";
    if (method === "GET" && path.startsWith("/trees?") && env.REVENANT_TEST_FAIL_LIST) headers[FAIL_ONCE_HEADER] = "1";
    if (method === "GET" && path.startsWith("/keys?") && env.REVENANT_TEST_FAIL_KEY_READ) headers[FAIL_ONCE_HEADER] = env.REVENANT_TEST_FAIL_KEY_READ;
    if (method === "DELETE" && env.REVENANT_TEST_FAIL_ROW_DELETE) headers[FAIL_ONCE_HEADER] = env.REVENANT_TEST_FAIL_ROW_DELETE;
  }
  return headers;
}

// owns answers whether the caller's directory has the tree: the cache,
// else the directory (undefined: the directory did not answer).
async function owns(env, d) {
  const key = d.principal + "\n" + d.root;
  const mode = ownerCache(env);
  if (mode !== "off" && owned.has(key)) return true;
  const mine = await directoryOwns(env, d);
  if (mine && mode !== "off") {
    if (owned.size >= OWNED_MAX) owned.clear();
    owned.add(key);
  }
  return mine;
}

// directoryOwns asks the caller's directory whether it has the tree
// (undefined: the directory did not answer).
async function directoryOwns(env, d) {
  const res = await directoryFetch(env, d.principal, "GET", "/trees/" + d.root);
  await res.body?.cancel();
  if (res.status === 404) return false;
  if (res.status !== 200) return undefined;
  return true;
}

const notFound = () => json(404, { error: { type: "not_found", message: "no such session" } });
const directoryUnavailable = () =>
  json(503, { error: { type: "unavailable", message: "the session directory did not answer; try again" } });

// forward does the owner check, then sends the request to the tree's
// object with the front's headers; the answer (an event stream included)
// passes through as it is.
async function forward(request, env, d) {
  const mine = await owns(env, d);
  if (mine === false) return notFound();
  if (mine === undefined) return directoryUnavailable();
  if (d.tooLarge) return refuseTooLarge(request, d);
  if (request.method !== "GET" && request.method !== "HEAD" && d.bodiless) {
    // The route reads no body (an interrupt): none is sent on, and none
    // is waited for past ignoreBody's grace, so a body declared and held
    // back cannot hold the answer (the local server answers at once too).
    // Bodiless, it may be sent again.
    const ignoring = request.body ? ignoreBody(request.body.getReader()) : undefined;
    try {
      return await sendToTree(env, d.root, d.principal, request.method, d.url, request.headers, undefined);
    } finally {
      await ignoring?.stop();
    }
  }
  if (request.method !== "GET" && request.method !== "HEAD") {
    // Read whole (at most one byte over the cap, so that the object answers
    // the API's 413) so that it can be sent again to a fresh object.
    const body = request.body ? await clientBody(request, d.maxBody) : undefined;
    if (body === null) return unreadBody();
    return sendToTree(env, d.root, d.principal, request.method, d.url, request.headers, body);
  }
  // A read may also be sent again after a failed fetch: the object may
  // have been given up with the read in hand (its Go program ended during
  // it). Once only, and never for an overloaded object.
  try {
    return await sendToTree(env, d.root, d.principal, request.method, d.url, request.headers, undefined);
  } catch (e) {
    if (e?.overloaded) throw e;
    console.warn("revenant front: a read's object fetch failed; sending it again", String(e));
    return await sendToTree(env, d.root, d.principal, request.method, d.url, request.headers, undefined);
  }
}

// SPENT_WAITS_MS are the waits before each send again to an object that
// answered it had been given up: its abort waits for the answers it has
// in hand (a 0 ms timer once none is pending, then the storage's pending
// writes), so a send may be refused more than once; the last about 400 ms
// after the first refusal. An answer that never returns holds the abort
// for at most the object's give-up wait (10 s, or the tree's
// interrupt_grace and 5 s, at most 25 s: shim.js giveUpWaitMS): until
// then the tree's requests are answered 503 here.
const SPENT_WAITS_MS = [10, 40, 100, 250];

// sendToTree is treeFetch, sent again (with a copy of the same body)
// while the object answers with SPENT_HEADER: it had been given up (a
// panic's 500 or a failed delete answered a moment before, its Go program
// ended) and refused the request unread, doing nothing, so that sending it
// again is safe even for a write. The next send reaches a fresh object on
// the same storage once the spent one's abort is done. A failed fetch is
// thrown: the object may have acted on the request (an abort can cut an
// answer still on its way out), so a write is answered 503, not sent again.
async function sendToTree(env, root, principal, method, path, headers, body) {
  for (let i = 0; ; i++) {
    const res = await treeFetch(env, root, principal, method, path, headers, body?.slice(0));
    if (!res.headers.has(SPENT_HEADER)) return res;
    await res.body?.cancel();
    if (i === SPENT_WAITS_MS.length) {
      console.warn("revenant front: the session's object stayed given up", root);
      return json(503, { error: { type: "unavailable", message: "the session's object is restarting; try again" } });
    }
    console.warn("revenant front: the session's object was given up; sending the request again", root);
    await new Promise((resolve) => setTimeout(resolve, SPENT_WAITS_MS[i]));
  }
}

// create: Go checks the body and mints the root id; the tree is created
// in its object, then recorded in the caller's directory with the
// session's own created_at (the object's 201 names it). A tree that
// could not be recorded is deleted again (best effort: createTree says
// when), and the answer is 503; so is one whose object's answer was lost
// (the fetch failed: the object may have committed the tree before it
// went), since its id is known to nobody else. (A create the object
// refused leaves nothing: the object unmakes it, durableobject/shim.js.)
// The steps after Go's check run to their end even if the client goes
// away meanwhile (lasting): a create whose answer the client lost is
// recorded, and found in its list.
async function create(request, env, ctx, d, front) {
  if (d.tooLarge) return refuseTooLarge(request, d);
  const raw = await clientBody(request, d.maxBody);
  if (raw === null) return unreadBody();
  const body = new Uint8Array(raw);
  const c = front.create(body, d.keys); // over the cap: refused before Go copies it
  if (c.status !== undefined) return answer(c);
  if (c.key !== undefined) {
    // A create key the caller's directory knows: its tree is the answer
    // (or the key's conflict), and nothing is created.
    const res = await directoryFetch(env, d.principal, "GET", "/keys?" + new URLSearchParams({ key: c.key }));
    if (res.status === 200) return answer(front.keyed(c.key, c.digest, await res.text()));
    await res.body?.cancel();
    if (res.status !== 404) return directoryUnavailable();
  }
  return await lasting(ctx, createTree(env, d, c, request.headers, body, front));
}

// createTree creates tree c.root in its object and records it in the
// caller's directory, with its create key if it has one (create's steps
// after Go's check). A create with the same key recorded first (the PUT's
// 409 with the key's record) wins: this one's tree is deleted, and the
// answer is the key's.
async function createTree(env, d, c, headers, body, front) {
  const root = c.root;
  let res;
  try {
    // A new tree's object was never given up; sendToTree all the same, so
    // that no answer with SPENT_HEADER can reach a client.
    res = await sendToTree(env, root, d.principal, "POST", "/v1/sessions", headers, body);
  } catch (e) {
    console.error("revenant front: a create's object fetch failed; deleting what it may have made", root, e);
    await discard(env, root, d.principal);
    return unavailable();
  }
  if (res.status !== 201) return res;
  const created = createdAt(res, root);
  const q = new URLSearchParams({ principal: d.principal, created_at: String(created.at) });
  if (c.key !== undefined) {
    q.set("key", c.key);
    q.set("digest", c.digest);
  }
  const put = await directoryFetch(env, d.principal, "PUT", "/trees/" + root + "?" + q);
  const keyTaken = put.status === 409 && c.key !== undefined ? await put.text() : "";
  if (keyTaken !== "") {
    await discard(env, root, d.principal);
    await created.answer.body?.cancel();
    return answer(front.keyed(c.key, c.digest, keyTaken));
  }
  // A PUT that failed may have committed its row all the same (its
  // answer lost), and a same-key retry may have been answered this tree
  // already; or it may still land. So the tree is deleted only once the
  // directory has barred its id (unmake), which it does only if no row
  // records it; a row there means the create succeeded. (A 409's id is
  // another tree's.)
  const unmade = put.status === 201 ? 409 : put.status === 409 ? 204 : await unmake(env, root, d.principal);
  if (unmade === 409) {
    if (put.status !== 201) console.warn("revenant front: a new tree's recording failed, but its row is there", root, put.status);
    if (ownerCache(env) !== "off") owned.add(d.principal + "\n" + root);
    return created.answer;
  }
  console.error("revenant front: recording a new tree failed", root, put.status);
  if (unmade === 204) await discard(env, root, d.principal);
  await created.answer.body?.cancel();
  return json(503, { error: { type: "unavailable", message: "the session could not be recorded; try again" } });
}

// lasting makes the steps of a create or a delete (work, a
// Promise, started) outlive the client: Cloudflare cancels a fetch
// handler's pending promises when its client disconnects, but runs those
// given to ctx.waitUntil on, for up to 30 s after. Cut between its two
// steps, a create would leave a tree no row records (nobody could list,
// read or delete it: its id went to nobody) and a delete a listed row
// whose tree is gone. The handler still awaits work for its answer. A
// test that cut the request awaits what was given to ctx.waitUntil (cut).
function lasting(ctx, work) {
  ctx.waitUntil(work.catch(() => {})); // work's failure is the handler's to answer
  return work;
}

// discard deletes a new tree no directory row records (best effort: a
// failure is logged) and says whether the tree is gone. A tree its object
// never made answers 404. Sent again as a client's delete is (sendToTree):
// an object that gave itself up as it answered the create's 201 refuses
// this delete unread until its abort is done.
async function discard(env, root, principal) {
  try {
    const del = await sendToTree(env, root, principal, "DELETE", "/v1/sessions/" + root, undefined, undefined);
    await del.body?.cancel();
    if (del.status === 204 || del.status === 404) return true;
    console.error("revenant front: deleting an unrecorded tree failed", root, del.status);
  } catch (e) {
    console.error("revenant front: deleting an unrecorded tree failed", root, e);
  }
  return false;
}

// unmake asks the caller's directory to bar tree root's id from any
// later PUT, unless a row records it (directory.mjs, unmade=1): 204
// barred, the tree may be deleted (no PUT still on its way can record it,
// nor its key); 409 recorded (a PUT whose answer was lost committed), the
// create succeeded. Any other answer is asked again (the request is
// idempotent), after UNMAKE_WAITS_MS, within lasting's window; the last
// leaves the tree as it is (logged): it may be recorded, and a recorded
// tree is never deleted here, since a retry with its key may have been
// answered its id. Unrecorded, it is left unlisted, as a create the
// front's death cut short leaves its tree.
async function unmake(env, root, principal) {
  for (let i = 0; ; i++) {
    const res = await directoryFetch(env, principal, "DELETE", "/trees/" + root + "?unmade=1");
    await res.body?.cancel();
    if (res.status === 204 || res.status === 409) return res.status;
    if (i === UNMAKE_WAITS_MS.length) {
      console.error("revenant front: barring an unrecorded tree's id failed; it is left", root, res.status);
      return res.status;
    }
    console.warn("revenant front: barring an unrecorded tree's id failed; asking again", root, res.status);
    await new Promise((resolve) => setTimeout(resolve, UNMAKE_WAITS_MS[i]));
  }
}

// UNMAKE_WAITS_MS are the waits before each of unmake's tries after the
// first: three in all, well within the 30 s a waitUntil is given.
const UNMAKE_WAITS_MS = [50, 250];

// createdAt is the new session's created_at from the object's 201
// (durableobject.CreatedAtHeader), so the list and the session agree; the
// header is for the front only and is removed from the answer. A 201
// without it (never, from this Worker's object) is logged and the front's
// clock stands in.
function createdAt(res, root) {
  const answer = new Response(res.body, res);
  const at = Number(answer.headers.get(CREATED_AT_HEADER));
  answer.headers.delete(CREATED_AT_HEADER);
  if (Number.isSafeInteger(at) && at > 0) return { answer, at };
  console.error("revenant front: the new tree's 201 had no created_at", root);
  return { answer, at: Date.now() };
}

// list asks the caller's directory for the page Go decided on (d.url:
// limit and cursor checked) and lets Go shape the answer from its rows.
async function list(env, d, front) {
  const res = await directoryFetch(env, d.principal, "GET", d.url);
  if (res.status !== 200) {
    await res.body?.cancel();
    return directoryUnavailable();
  }
  return answer(front.page(await res.text()));
}

// remove deletes the tree in its object, then its directory row; the
// object's answer goes back. The owner is asked of the directory itself,
// not the cache (a delete is neither hot nor latency-bound). A crash
// between the two leaves a listed row whose object answers 404 (its tree
// is gone): deleting it again removes the row and answers 204, since the
// delete is then complete. A child's id deletes nothing (the object
// refuses it, 400, or answers 404 for a tree gone): the row stays for the
// root's delete. A client that goes away once the owner check is done
// does not stop the two steps (lasting): only a crash (a waitUntil does
// not outlive the front's process) leaves that row.
async function remove(request, env, ctx, d) {
  const mine = await directoryOwns(env, d);
  if (mine === false) return notFound();
  if (mine === undefined) return directoryUnavailable();
  return await lasting(ctx, deleteTree(request, env, d));
}

// deleteTree deletes tree d.root in its object, then its directory row
// (remove's steps after the owner check).
async function deleteTree(request, env, d) {
  let res = await sendToTree(env, d.root, d.principal, "DELETE", d.url, request.headers, undefined);
  if (!d.child && (res.status === 204 || res.status === 404)) {
    const del = await directoryFetch(env, d.principal, "DELETE", "/trees/" + d.root);
    await del.body?.cancel();
    if (del.status !== 204) {
      await res.body?.cancel();
      return directoryUnavailable();
    }
    if (res.status === 404) {
      await res.body?.cancel();
      res = new Response(null, { status: 204 });
    }
  }
  if (ownerCache(env) !== "stale") owned.delete(d.principal + "\n" + d.root);
  return res;
}

export default {
  async fetch(request, env, ctx) {
    const front = frontLogic(env);
    if (!front) return json(500, { error: { type: "internal", message: "the front did not start; see the Worker's log" } });
    if (front.testBuild && env.SELF && request.headers.has(CUT_HEADER)) return await cut(request, env);
    if (cutWaits) ctx = watched(ctx, cutWaits); // set by a cut only (the tests' build)
    const d = front.decide(request.method, request.url, [...request.headers]);
    const res = d.status !== undefined ? answer(d) : withHeaders(await serve(request, env, ctx, d, front), d.headers);
    await dropUnread(request);
    return res;
  },
};

// dropUnread gives up a request body nothing read, as ignoreBody does an
// interrupt's (read and thrown away, the rest dropped after
// UNREAD_GRACE_MS): the front's own refusals (a 401, a malformed id, a
// refused Origin) and the owner check's 404 answer without reading it, as
// the local server does. wrangler dev wraps the Worker in a middleware
// that reads an unused request body to its end before the answer goes out
// (wrangler/templates/middleware/middleware-ensure-req-body-drained.ts),
// so such an answer never reached a client that declared a body and held
// it back (found by probe 63); a body dropped here is locked, which the
// middleware skips. A body that was read, or given up already, is locked.
// One refusal still waits for its body under wrangler dev, cause not
// found: a compressed body's 400 (docs/api.md says so).
async function dropUnread(request) {
  if (request.body && !request.body.locked) await ignoreBody(request.body.getReader()).stop();
}

// cut, in the tests' build only (with the SELF service binding to the
// Worker itself that only the tests' wrangler.toml has), is a client that
// goes away while the front waits on the tree's object: it sends the
// request, without its x-revenant-test-cut header, to the Worker itself,
// and once the object holds its answer to the request's kind (the
// header: create or delete; durableobject/testhold.mjs) it aborts that
// request, which cancels the front's handling of it as a client's
// disconnect does on Cloudflare, and then lets the object's answer go on.
// It then awaits what the request gave to ctx.waitUntil (watched) and
// answers {root, cut, lasting} (cut: the request ended aborted; lasting:
// how many promises it gave to ctx.waitUntil, all settled), or the
// request's own answer if it came before any hold. A test reads the
// steps' effects as soon as it has the answer: a step the abort cancelled
// never ran, and no wait for something that never comes is needed. One
// cut at a time: every request that starts while one is under way is
// watched.
async function cut(request, env) {
  const h = armHold(request.headers.get(CUT_HEADER));
  const headers = new Headers(request.headers);
  headers.delete(CUT_HEADER);
  const body = request.method === "GET" || request.method === "HEAD" ? undefined : await request.arrayBuffer();
  const aborter = new AbortController();
  const waits = [];
  cutWaits = waits;
  const sent = env.SELF.fetch(request.url, { method: request.method, headers, body, signal: aborter.signal });
  const first = await Promise.race([h.reached.then((root) => ({ root })), sent.then((res) => ({ res }), (error) => ({ error }))]);
  cutWaits = null;
  if (first.root === undefined) {
    disarm(h);
    return first.res ?? json(500, { error: { type: "internal", message: "the cut request failed: " + first.error } });
  }
  aborter.abort();
  const aborted = await sent.then(
    () => false,
    (e) => e?.name === "AbortError",
  );
  h.release();
  await Promise.allSettled(waits);
  return json(200, { root: first.root, cut: aborted, lasting: waits.length });
}

// cutWaits, while a cut is under way (the tests' build only), collects the
// promises the requests that start give to ctx.waitUntil (watched).
let cutWaits = null;

// watched is ctx whose waitUntil also adds each promise to waits.
function watched(ctx, waits) {
  return {
    waitUntil(p) {
      waits.push(p);
      ctx.waitUntil(p);
    },
    passThroughOnException() {
      ctx.passThroughOnException();
    },
  };
}

// serve does what the front decided (d).
async function serve(request, env, ctx, d, front) {
  try {
    switch (d.kind) {
      case FORWARD:
        return await forward(request, env, d);
      case CREATE:
        return await create(request, env, ctx, d, front);
      case LIST:
        return await list(env, d, front);
      case DELETE:
        return await remove(request, env, ctx, d);
    }
  } catch (e) {
    console.error("revenant front: object fetch failed", e);
    return unavailable();
  }
  console.error("revenant front: unknown decision", d.kind);
  return json(500, { error: { type: "internal", message: "internal error" } });
}
