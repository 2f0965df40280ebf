// revenant's Durable Object host, JS side: a thin class that starts one Go
// instance per object (build/revenant.wasm, cmd/worker, in its "tree"
// role) and forwards its events to Go; worker/entry.mjs exports it beside the
// front Worker (worker/). Everything the tree
// does is in Go; this file only keeps the platform's rules (DESIGN §13):
//   - the boot runs inside blockConcurrencyWhile, before any request or
//     alarm is served;
//   - Go's entry points return Promises; nothing here blocks;
//   - if the Go program has exited (a panic escaped), the object aborts so
//     the next event gets a fresh one, with its data intact;
//   - an object given up (Go's memory no longer matches the storage)
//     refuses new requests unread and aborts once its answers in hand
//     are out and its pending writes confirmed, each wait bounded by
//     giveUpWaitMS (10 to 25 s, from the tree's interrupt_grace);
//   - the object stores its own tree id (an alarm-woken object has no
//     ctx.id.name), and deletes it with all else a create stored when the
//     create did not end in a 201 (unmake);
//   - alarm() never throws (a thrown alarm is retried a few times, then lost);
//   - a boot that failed for the Worker's configuration (Go's setup: a
//     var or secret missing or malformed) is answered 500 on every request,
//     not thrown: the front would answer a throw 503 "try again", and no
//     retry can help until the vars change.
import { DurableObject } from "cloudflare:workers";
import "../build/wasm_exec.js"; // Go's, copied at build time (make do-build)
import goModule from "../build/revenant.wasm";
import { sqlExec, sqlQuery, sqlScript, txSync } from "./sql.mjs";
import { readBody } from "./body.mjs";
import { untilEnded } from "./ended.mjs";
import { hold } from "./testhold.mjs";

const TREE_KEY = "revenant:tree"; // the object's tree id in ctx.storage
const TREE_HEADER = "x-revenant-tree"; // set by the front for the object
export const SPENT_HEADER = "x-revenant-spent"; // an object given up refused the request unread (refuseSpent)
const BRIDGES = "__revenantBridges"; // see cmd/worker
const MAX_BODY = 1 << 20; // api.DefaultMaxBody

// GIVE_UP_WAIT_MS bounds how long an object given up waits for the
// answers it has in hand before it aborts all the same, cutting them
// (abortWhenAnswered), when its Go program did not say (giveUpWaitMS: it
// says at boot). Until it aborts every other request to the tree is
// refused (refuseSpent), and the front's sends again last about 400 ms
// (SPENT_WAITS_MS), so one answer that never returns (a handler waiting
// on a lock the panic left held) would keep the tree unavailable for
// good. Every answer the object gives returns from its own work: the
// front hands it a body already read whole (a slow upload holds the
// front, not the object), an event stream returns as it starts (one
// answered as the object was given up returns at once, giveUp), and the
// rest is SQL on the object's storage, milliseconds. The slowest are an
// interrupt, which waits up to interrupt_grace (5 s by default) for the
// running turn to record it, and a delete, which waits as long (and at
// least 5 s) for the tree's turns to stop: so Go's wait is that and 5 s,
// at least this 10 s and at most 25 s, under the 30 s the platform
// allows a blockConcurrencyWhile before it resets the object itself
// (durableobject.giveUpWait). Neither the front nor workerd limits how
// long a request to an object may wait (Cloudflare none while the client
// stays). A write the abort cuts is answered 503 by the front (the
// object may have acted on it), a read is sent again.
const GIVE_UP_WAIT_MS = 10_000;

// Tree ids as the local host accepts them (host.ValidTreeID): they reach
// idFromName, so nothing else may.
const TREE_ID = /^[A-Za-z0-9_-]{1,64}$/;

let nextBridge = 0;

// The tests' build: the holds a request's test-hold parameter asked for
// and got, once each in the isolate: "at tree" (testHoldUntilGivenUp),
// "never method tree" (testHoldForGood).
const testHeld = new Set();

// spare is a Go program started before any object needs it ({go, bridge,
// ended, env}): the next new object of this isolate takes it instead of
// paying Go's start (instantiate + go.run) before it can answer. Only with
// REVENANT_SPARE = "on": the spare's start is isolate time too, and it
// lands on the request after a create, typically the new tree's own next
// request (docs/RATIONALE.md has the figures). One is started, from a
// timer, after an object booted; it runs
// nothing until taken (main only sets the entry points; the storage is
// read at boot). A program is taken once, by one object, only when it is
// ready (an object never waits for a spare: the timer that starts it
// belongs to the object that booted, and dies with it), and only with
// the same vars it was started with. Everything the object needs of it
// that is the starter's (a Promise) is made again by the object that
// takes it (watchEnd).
let spare = null;
let sparingSince = 0; // Date.now() when a spare's start was scheduled; 0: none pending
const SPARE_RETRY_MS = 10_000; // a start pending this long is taken for lost (its object went away)
// JSON_VARS hold JSON. wrangler.toml may give one as a table
// (REVENANT_SETTINGS = { max_body = 2097152 }), which reaches env as an
// object rather than a string: Go reads it as its JSON text.
const JSON_VARS = ["REVENANT_SETTINGS", "REVENANT_TOOLS"];

// varText is var name of env as Go reads it: a string as it is, a JSON var
// given as a table as JSON, anything else (a binding) undefined.
function varText(env, name) {
  const v = env[name];
  if (typeof v === "string") return v;
  if (v !== null && typeof v === "object" && JSON_VARS.includes(name)) return JSON.stringify(v);
  return undefined;
}

// FRONT_ONLY are the secrets only the front reads: a tree's Go program
// never sees them (it trusts the principal the front set), so nothing a
// tree does, a panic's dump included, can show them.
const FRONT_ONLY = ["REVENANT_TOKENS"];

// goEnv is the Worker's vars and secrets as a Go program's environment: Go
// reads its settings, provider and secrets with os.Getenv. Every other
// secret is given, since a webhook names its signing secret's var
// (REVENANT_TOOLS' secret_env) freely.
function goEnv(env, key) {
  const out = { REVENANT_BRIDGE: key };
  for (const k of Object.keys(env)) {
    if (FRONT_ONLY.includes(k)) continue;
    const v = varText(env, k);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

// startGo instantiates a Go program for the given vars and runs main until
// it blocks; bridge is the JS object Go sets its entry points on.
async function startGo(env) {
  const key = `b${nextBridge++}`;
  const bridge = { sqlExec, sqlScript, sqlQuery };
  globalThis[BRIDGES] ??= {};
  globalThis[BRIDGES][key] = bridge;
  const go = new Go();
  go.argv = ["revenant", "tree"]; // the role (cmd/worker)
  go.env = goEnv(env, key);
  const instance = await WebAssembly.instantiate(goModule, go.importObject);
  const program = { go, bridge, env: JSON.stringify(go.env, (k, v) => (k === "REVENANT_BRIDGE" ? undefined : v)) };
  // The program's end is seen by go.exit, which wasm_exec.js calls as the
  // program ends, inside the event that ended it (an event of the object
  // running it); ended is made by the object that runs it (watchEnd).
  // Not run()'s Promise: that one belongs to whoever started the program,
  // and a spare is started from a timer of another object, whose
  // Promises' continuations workerd cancels once that object is gone.
  const exitCode = go.exit;
  const exited = () => {
    program.exited = true;
    program.end?.();
  };
  go.exit = (code) => {
    exited();
    exitCode.call(go, code);
  };
  // run() returns once main has blocked: the entry points are set.
  go.run(instance).catch((e) => {
    console.error("revenant: the Go program failed:", e);
    exited();
  });
  delete globalThis[BRIDGES][key];
  if (program.exited || go.exited || typeof bridge.fetch !== "function") {
    throw new Error("revenant: the Go program did not start");
  }
  return program;
}

// watchEnd gives program its ended Promise, made by the object that runs
// it (ended.mjs waits on it): settled when the program ends.
function watchEnd(program) {
  program.ended = new Promise((resolve) => {
    program.end = resolve;
  });
  if (program.exited) program.end();
  return program;
}

// takeSpare returns the spare program if one is ready, was started with
// env's vars and still runs, else null; either way the spare is used up.
function takeSpare(env) {
  const p = spare;
  spare = null;
  if (!p) return null;
  const want = JSON.stringify(goEnv(env, ""), (k, v) => (k === "REVENANT_BRIDGE" ? undefined : v));
  return p.env === want && !p.exited && !p.go.exited ? p : null;
}

// startSpare schedules the spare's start once the current event is done
// (a timer, so the answer going out is not held), unless one is ready or
// pending.
function startSpare(env) {
  if (spare || env.REVENANT_SPARE !== "on") return;
  if (sparingSince && Date.now() - sparingSince < SPARE_RETRY_MS) return;
  sparingSince = Date.now();
  setTimeout(() => {
    startGo(env).then(
      (p) => {
        spare = p;
        sparingSince = 0;
        if (p.bridge.testBuild) console.log("revenant test: a spare Go program is ready");
      },
      (e) => {
        sparingSince = 0;
        console.error("revenant: the spare Go program did not start:", e);
      },
    );
  }, 0);
}

export class Tree extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.go = null; // the bridge once Go runs
    this.booted = false;
    this.answering = 0; // requests in fetch, their answers not yet returned
    ctx.blockConcurrencyWhile(async () => {
      const id = await ctx.storage.get(TREE_KEY);
      if (id) await this.boot(id);
    });
  }

  // start gives this object a Go program (the spare, or a new one) and
  // returns its bridge, on which Go has set boot, fetch and alarm.
  async start() {
    let program = takeSpare(this.env);
    if (program?.bridge.testBuild) console.log("revenant test: the object took a spare Go program");
    program = watchEnd(program ?? (await startGo(this.env)));
    const bridge = program.bridge;
    bridge.storage = this.ctx.storage;
    bridge.txSync = (cb) => txSync(this.ctx.storage, cb);
    bridge.abort = (reason) => this.ctx.abort(reason); // test builds' eviction route only
    bridge.gaveUp = () => {
      // Go's giveUp, as it happens.
      this.gaveUpNow();
      this.abortWhenAnswered();
    };
    this.givenUp = new Promise((resolve) => (this.gaveUpNow = resolve));
    this.program = program;
    this.goRuntime = program.go;
    return bridge;
  }

  // boot runs recovery's boot for tree id: migrations, a new epoch, the
  // sweep, the alarm re-armed. Callers hold blockConcurrencyWhile.
  async boot(id) {
    this.go ??= await this.start();
    this.treeId = id;
    try {
      await this.go.boot(id, await this.ctx.storage.getAlarm());
    } catch (e) {
      if (!e?.revenantSetup) throw e;
      this.setupFailed = true; // every boot of this object would fail alike
      console.error("revenant: the tree's object did not start: its configuration is invalid:", e.message);
      return;
    }
    this.booted = true;
    startSpare(this.env);
  }

  // abortIfSpent gives the object up at once, cutting the current event,
  // when it is spent (spent): the next event gets a fresh object (and Go
  // instance) on the same storage. For the alarm (retried on that fresh
  // object) and a request whose Go fetch failed as the program ended; a
  // request that meets a spent object is refused instead (refuseSpent),
  // and one in hand as the object is given up is answered first, the
  // abort waiting for every such answer, up to giveUpWaitMS
  // (abortWhenAnswered).
  abortIfSpent() {
    const why = this.spent();
    if (why) this.ctx.abort("revenant: " + why);
  }

  // spent says why this object was given up ("" while it serves): its Go
  // program ended, or Go asked to be given up (bridge.giveUp: its memory
  // no longer matches the storage), or a create unmade what it stored
  // (unmake).
  spent() {
    if (this.program?.exited || this.goRuntime?.exited) return "the Go program exited";
    return this.go?.giveUp || this.unmade || "";
  }

  // abortWhenAnswered gives the object up (abortSoon) when it is spent and
  // no request's answer is pending: fetch calls it as each answer returns,
  // so the last one out aborts the object (giveUp only buffers). Called as
  // Go gives up and as each request's answer returns, so that a give-up no
  // answer checks (a panic in an event stream already answered, a request
  // returning by a path that does not look) still aborts: the object must
  // not serve on with memory that no longer matches its storage until its
  // next event.
  //
  // A give-up aborts only this way, so that the abort cuts no request in
  // hand, one its Go program may have acted on (the front can only answer
  // such a cut 503): the requests that reach the object after the give-up
  // are refused unread, and the abort waits for the last answer. (One that
  // comes between the timer's start and the abort is refused, and its
  // refusal can still be cut; the front answers such a write 503 too, and
  // sends such a read again.) The wait is bounded
  // (abortPastWait): an answer that never returns must not keep the tree
  // refused for good. A Go program that ended and the alarm abort at once
  // instead (abortIfSpent): nothing can be answered after the first, and
  // the second must throw.
  abortWhenAnswered() {
    const why = this.spent();
    if (!why) return;
    if (this.answering === 0 && !this.lingering) this.abortSoon(why);
    else this.abortPastWait(why);
  }

  // abortPastWait starts, once, the bound on abortWhenAnswered's wait
  // (giveUpWaitMS): past it, the object aborts all the same, cutting
  // the answers still pending. Nothing pending then (the tests' linger,
  // which the next request ends), it does nothing, and the next wait
  // starts a new bound.
  abortPastWait(why) {
    if (this.pastWait || this.aborting) return;
    const ms = this.giveUpWaitMS();
    this.pastWait = setTimeout(() => {
      this.pastWait = null;
      if (this.aborting || this.answering === 0) return;
      this.aborting = true;
      console.error(
        `revenant: tree ${this.treeId}: ${this.answering} answer${this.answering === 1 ? "" : "s"} still pending ${ms} ms after the object was given up (${why}); aborting it, which cuts them`,
      );
      try {
        this.ctx.abort(`revenant: ${why} (answers still pending)`);
      } catch {} // abort throws by design
    }, ms);
  }

  // giveUpWaitMS is the wait Go set at boot (bridge.giveUpWaitMS: from
  // the tree's interrupt_grace, durableobject.setWaits), else
  // GIVE_UP_WAIT_MS.
  giveUpWaitMS() {
    const n = this.go?.giveUpWaitMS;
    return Number.isSafeInteger(n) && n > 0 ? n : GIVE_UP_WAIT_MS;
  }

  // abortSoon gives the object up once the current event's answer is out
  // (a timer: an abort now would cut that answer). abortWhenAnswered's.
  // It first waits for the storage's pending writes (storage.sync): an
  // answer the output gate still holds, of a write Go made, goes out only
  // once that write is confirmed, and an abort before that may lose it
  // (the front would answer a committed write 503; the platform does not
  // say). Locally the writes are confirmed before the timer fires (sync
  // settles at once, so this changes nothing there); on Cloudflare the
  // confirmation is a round trip to the storage's replicas. A sync
  // that fails or never settles does not keep the object: it aborts all
  // the same, at the latest giveUpWaitMS after this wait began (a
  // bound of its own, after the answers' one, abortPastWait, if any).
  abortSoon(why) {
    if (this.aborting) return;
    this.aborting = true;
    setTimeout(async () => {
      try {
        const ms = this.giveUpWaitMS();
        const synced = await Promise.race([
          this.ctx.storage.sync().then(() => true),
          new Promise((resolve) => setTimeout(() => resolve(false), ms)),
        ]);
        if (!synced) {
          // Said, as the answers' bound says its cut: an operator can
          // tell this abort from the others.
          console.error(`revenant: tree ${this.treeId}: storage.sync did not settle ${ms} ms after the object was given up (${why}); aborting it all the same`);
        }
      } catch {} // the abort below is what matters
      try {
        this.ctx.abort("revenant: " + why);
      } catch {} // abort throws by design
    }, 0);
  }

  // refuseSpent answers a request that reached an object already given up
  // (its abort not yet done: it waits for the answers in hand, and under
  // load the client's next request can come first) with SPENT_HEADER,
  // reading nothing of it and doing nothing, so that the front can send it
  // again, a write too: the next send reaches a fresh object on the same
  // storage. It does not abort: fetch does once no answer is pending
  // (abortWhenAnswered), since an abort now would cut the others, which
  // the front could not tell from requests acted on.
  refuseSpent(request, why) {
    request.body?.cancel().catch(() => {});
    this.lingering = false; // the tests' linger ends with the next request
    const res = json(503, { error: { type: "unavailable", message: "the session's object is restarting; try again" } });
    res.headers.set("retry-after", "1");
    res.headers.set(SPENT_HEADER, "1");
    return res;
  }

  async fetch(request) {
    this.answering++;
    try {
      return await this.answer(request);
    } finally {
      this.answering--;
      this.abortWhenAnswered();
    }
  }

  // answer is fetch's work (fetch counts the requests it has in hand).
  async answer(request) {
    const spent = this.spent();
    if (spent) return this.refuseSpent(request, spent);
    // The tests' build: a panic route asked to linger leaves the object
    // given up but not aborted until its next request, the worst case of
    // the abort's timer (TestWorkerdEvictAndPanic).
    const linger = this.go?.testBuild && new URL(request.url).searchParams.has("linger");
    const id = request.headers.get(TREE_HEADER);
    let making = false; // this request stored the tree's id in an empty object: a create
    if (!this.booted && !this.setupFailed) {
      const creating = request.method === "POST" && new URL(request.url).pathname === "/v1/sessions";
      if (!creating || !id || !TREE_ID.test(id)) {
        // The body is consumed all the same (up to the cap): a body left
        // unread after the answer leaves the client's connection hanging
        // in wrangler dev.
        await readBody(request, this.bodyLimit());
        return notFound();
      }
      // Store the id first: a boot killed midway is finished by the next one.
      await this.ctx.blockConcurrencyWhile(async () => {
        if (this.booted || this.setupFailed) return;
        await this.ctx.storage.put(TREE_KEY, id);
        making = true;
        await this.boot(id);
      });
    } else if (id && id !== this.treeId) {
      await readBody(request, this.bodyLimit());
      return notFound();
    }
    if (this.setupFailed) {
      await readBody(request, this.bodyLimit());
      if (making) await this.unmake();
      return misconfigured();
    }
    const body = request.method === "GET" || request.method === "HEAD" ? undefined : await readBody(request, this.bodyLimit());
    if (this.go.testBuild) {
      await this.testHoldUntilGivenUp(request, "body");
      await this.testHoldForGood(request);
      this.testSyncNever(request);
    }
    // Another request may have given the object up while this one's body
    // was read: its Go program must not act on it either (the front has
    // the body and sends it again). A create's object is new, never so.
    const spentSince = making ? "" : this.spent();
    if (spentSince) return this.refuseSpent(request, spentSince);
    let response;
    try {
      // A panic that escaped Go ends the program and leaves its Promise
      // unsettled: the program's end answers instead.
      response = await untilEnded(this.program, this.go.fetch(request.method, request.url, [...request.headers], body));
    } catch (e) {
      console.error("revenant: fetch failed:", e);
      this.abortIfSpent(); // a program that ended: the front deletes what the create left (its fetch fails)
      if (making) await this.unmake();
      return json(500, { error: { type: "internal", message: "internal error" } });
    }
    if (making && response.status !== 201) {
      await this.unmake();
      return await this.giveUp(response);
    }
    // The tests' build: the answer to a create or a root's delete (its
    // commit done) may wait for a test that cuts the request (testhold.mjs).
    if (this.go.testBuild) {
      if (making && response.status === 201) await hold("create", this.treeId);
      if (request.method === "DELETE" && response.status === 204) await hold("delete", this.treeId);
    }
    if (this.go.testBuild) await this.testHoldUntilGivenUp(request, "answer");
    if (this.go.giveUp) return await this.giveUp(response, linger);
    return response;
  }

  // testHoldUntilGivenUp, in the tests' build, holds a request whose URL
  // has test-hold=at (body: its body read, before the object looks again
  // at whether it was given up; answer: Go's answer in hand, before the
  // same) until Go gives the object up, as another request's panic would
  // meanwhile, the rare case that TestWorkerdEvictAndPanic cannot wait
  // for. Once per tree in the isolate: the front's send again of the same
  // request reaches a fresh object, which must not hold it.
  async testHoldUntilGivenUp(request, at) {
    if (new URL(request.url).searchParams.get("test-hold") !== at) return;
    const key = at + " " + this.treeId;
    if (testHeld.has(key)) return;
    testHeld.add(key);
    console.log(`revenant test: the object holds a request (${at}) until it is given up: ${this.treeId}`);
    await this.givenUp;
  }

  // testHoldForGood, in the tests' build, holds a request whose URL has
  // test-hold=never (its body read) for good: an answer that never
  // returns, as one stuck in Go would (a handler waiting on a lock that a
  // panic left held, a delete waiting on an execution that ignores its
  // cancellation). Only the object's abort ends it. Once per tree and
  // method in the isolate, as testHoldUntilGivenUp: the front's send again
  // of a cut read reaches a fresh object, which must not hold it.
  async testHoldForGood(request) {
    if (new URL(request.url).searchParams.get("test-hold") !== "never") return;
    const key = "never " + request.method + " " + this.treeId;
    if (testHeld.has(key)) return;
    testHeld.add(key);
    console.log(`revenant test: the object holds a request for good: ${request.method} ${this.treeId}`);
    await new Promise(() => {});
  }

  // testSyncNever, in the tests' build, makes this object's
  // storage.sync never settle from a request whose URL has
  // test-sync=never on, as a confirmation of its writes that never comes
  // back would on Cloudflare (locally sync settles at once): an object
  // given up must abort all the same, past abortSoon's bound. Only this
  // object's storage: a fresh object's syncs settle.
  testSyncNever(request) {
    if (new URL(request.url).searchParams.get("test-sync") !== "never") return;
    const tree = this.treeId;
    this.ctx.storage.sync = () => {
      console.log(`revenant test: the object's storage.sync never settles: ${tree}`);
      return new Promise(() => {});
    };
  }

  // unmake deletes what a create left in an object it found empty when
  // the create did not end in a 201 (the object refused it, e.g. a model
  // outside allowed_models, or its configuration is invalid, or it
  // failed): the stored tree id and the tables the boot made. The front
  // records no directory row for such a create and its client got no id,
  // so a tree left there could never be listed, read or deleted. The
  // object is then given up (its Go program holds the tree it booted),
  // once the create is answered: until it goes, it serves nothing.
  async unmake() {
    this.booted = false;
    this.unmade = "a create that created nothing";
    try {
      await this.ctx.storage.deleteAlarm();
      await this.ctx.storage.deleteAll();
    } catch (e) {
      console.error("revenant: deleting what a refused create stored failed:", e);
    }
  }

  // bodyLimit is the API's body cap for this object: REVENANT_SETTINGS'
  // max_body, else 1 MiB (Go checks the var; with a malformed one the
  // program never starts).
  bodyLimit() {
    if (this.maxBody === undefined) {
      this.maxBody = MAX_BODY;
      try {
        const n = JSON.parse(varText(this.env, "REVENANT_SETTINGS") || "{}")?.max_body;
        if (typeof n === "number" && n > 0) this.maxBody = n;
      } catch {} // Go reports it
    }
    return this.maxBody;
  }

  // giveUp answers response (the 500 of a handler that panicked, the 503
  // of a failed delete; whole) of an object given up: Go's memory no
  // longer matches the storage, so once no answer is pending fetch aborts
  // it (abortWhenAnswered) and the next event gets a fresh object and Go
  // program on the same storage.
  async giveUp(response, linger = false) {
    // An event stream that began as another request gave the object up
    // never ends by itself: it goes out as it is and ends with the abort
    // (its client reconnects, from its Last-Event-ID, to a fresh object).
    if (response.headers.get("content-type")?.startsWith("text/event-stream")) return response;
    const body = await response.arrayBuffer();
    this.lingering = linger;
    if (linger) console.log("revenant test: the object was given up and lingers until its next request");
    return new Response(body, response);
  }

  async alarm() {
    // An object given up ends here and the alarm is retried on a fresh
    // object (the one exception to "never throw"). On workerd ctx.abort
    // stops the handler outright, so no catch could swallow it; it stays
    // outside the try so that holds on any runtime
    // (TestWorkerdEvictAndPanic/Go_exited_between_events).
    this.abortIfSpent();
    // As when a boot threw: the alarm is retried on a fresh object, which
    // boots with the vars of its time.
    if (this.setupFailed) this.ctx.abort("revenant: the tree's configuration is invalid (see the log)");
    try {
      // Not booted: a tree never created, or deleted; nothing to wake.
      // As for a request: a program that ends mid-alarm (a panic escaped
      // a goroutine during the hold) leaves Go's Promise unsettled, and
      // its end answers instead.
      if (this.booted) await untilEnded(this.program, this.go.alarm());
    } catch (e) {
      console.error("revenant: alarm failed:", e);
    }
    // Go's alarm fails only by a panic (it then gave the object up) or
    // the program's end: either way the wake-up was used up without
    // being re-armed, so the object is given up here and the alarm is
    // retried on a fresh object, whose boot re-arms from storage.
    this.abortIfSpent();
    // The tests' build: a handler that returns has used its alarm up
    // (workerd retries only one that throws), so a test that made the
    // handler fail sees at once whether the object aborted (the line then
    // comes from the retry, on a fresh object) or returned
    // (TestWorkerdEvictAndPanic, TestWorkerdMisconfigurationKeepsTheAlarm).
    if (this.go?.testBuild) console.log(`revenant test: the alarm handler returned: ${this.treeId}`);
  }
}

function json(status, body) {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", "x-content-type-options": "nosniff", "cache-control": "no-store" } });
}

// goModule is the Worker's one Go program; worker/entry.mjs starts the
// front's instance from it too.
export { goModule, varText };

// misconfigured answers every request to an object whose boot failed for
// the Worker's configuration (the reason is in the log): a 500, as the
// front answers its own ("the front did not start"), not a 503 that asks
// for a retry.
function misconfigured() {
  return json(500, { error: { type: "internal", message: "the session's object did not start: its configuration is invalid; see the Worker's log" } });
}

function notFound() {
  return json(404, { error: { type: "not_found", message: "no such session" } });
}
