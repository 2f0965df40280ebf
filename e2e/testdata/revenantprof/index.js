// revenant's shim with marks, for the profiles of make bench-workerd
// (REVENANT_BENCH_PROFILE=1); test-only, not shipped. Each mark is a
// console line the harness timestamps as it arrives (Date.now does not
// move during synchronous JS on workerd, so the object cannot time its
// own Go work). It also counts sql.exec calls and transactionSync calls.
//
// Cold marks ("prof: o<n> <what>") split a new object's first answer.
// With the var PROF_TURN = "on", turn marks ("turnprof <what>") split a
// warm turn: each transactionSync (and its sql.exec count), storage.sync,
// the alarm calls, the model's fetch and each chunk of its body, and each
// chunk written to an event stream (with its SSE event type).
import { Tree as Base } from "../../../durableobject/shim.js";
import front, { Directory } from "../../../worker/entry.mjs";

export { Directory };

let seq = 0;
let turnMarks = false;
const dec = new TextDecoder();

// tmark logs a turn mark with Date.now(), which on workerd moves only
// between events (I/O, timers): a mark is stamped with the start of the
// event it runs in, so synchronous work shows as the gap to the next
// event's marks. The harness orders and splits the marks by these stamps,
// not by the lines' arrival (the log pipe delays them).
function tmark(what) {
  if (turnMarks) console.log(`turnprof ${Date.now()} ${what}`);
}

// sseTypes names the events of a chunk written to an event stream.
function sseTypes(chunk) {
  if (!(chunk instanceof Uint8Array)) return "?";
  const s = dec.decode(chunk);
  const types = [...s.matchAll(/"type":"([^"]+)"/g)].map((m) => m[1].replace(/^session\./, ""));
  return `${chunk.byteLength}B ${types.join(",") || JSON.stringify(s.slice(0, 12))}`;
}

// Marks on the isolate's globals: the Go program reads them when it
// starts, after this module is evaluated.
const writerProto = globalThis.WritableStreamDefaultWriter?.prototype;
if (writerProto) {
  const write = writerProto.write;
  writerProto.write = function (chunk) {
    tmark(`sse ${sseTypes(chunk)}`);
    return write.call(this, chunk);
  };
}
const origFetch = globalThis.fetch;
globalThis.fetch = async function (input, init) {
  const url = typeof input === "string" ? input : input?.url ?? "";
  if (!turnMarks || !String(url).includes("/chat/completions")) return origFetch(input, init);
  tmark("model fetch");
  const res = await origFetch(input, init);
  tmark(`model headers ${res.status}`);
  if (!res.body) return res;
  const { readable, writable } = new TransformStream({
    transform(chunk, ctl) {
      tmark(`model chunk ${chunk.byteLength}B`);
      ctl.enqueue(chunk);
    },
    flush() {
      tmark("model end");
    },
  });
  res.body.pipeTo(writable).catch(() => {});
  return new Response(readable, res);
};

export class Tree extends Base {
  constructor(ctx, env) {
    super(ctx, env); // the base checks ctx's type: the counting proxy replaces it after
    turnMarks ||= env.PROF_TURN === "on";
    const counts = { exec: 0, tx: 0 };
    const bind = (target, p) => {
      const v = Reflect.get(target, p);
      return typeof v === "function" ? v.bind(target) : v;
    };
    const sql = new Proxy(ctx.storage.sql, {
      get: (t, p) => (p === "exec" ? (...a) => (counts.exec++, t.exec(...a)) : bind(t, p)),
    });
    const transactionSync = (fn) => {
      counts.tx++;
      const before = counts.exec;
      tmark(`tx+ ${counts.tx}`);
      try {
        return ctx.storage.transactionSync(fn);
      } finally {
        tmark(`tx- ${counts.tx} exec=${counts.exec - before}`);
      }
    };
    const marked = (name, f) => (...a) => {
      tmark(`${name}+`);
      const p = f(...a);
      p?.then?.(() => tmark(`${name}-`), () => tmark(`${name}!`));
      return p;
    };
    const storage = new Proxy(ctx.storage, {
      get: (t, p) => {
        if (p === "sql") return sql;
        if (p === "transactionSync") return transactionSync;
        if (p === "sync" || p === "setAlarm" || p === "deleteAlarm" || p === "getAlarm") return marked(p, t[p].bind(t));
        return bind(t, p);
      },
    });
    // The shim's boot reads this.ctx only after an await: it sees the proxy.
    Object.defineProperty(this, "ctx", { value: new Proxy(ctx, { get: (t, p) => (p === "storage" ? storage : bind(t, p)) }) });
    this.counts = counts;
    this.obj = `o${seq++}`;
  }

  mark(what) {
    console.log(`prof: ${this.obj} ${what} exec=${this.counts.exec} tx=${this.counts.tx}`);
  }

  async start() {
    this.mark("start");
    const bridge = await super.start();
    this.mark("started");
    const boot = bridge.boot;
    bridge.boot = async (...a) => {
      await boot(...a);
      this.mark("booted");
    };
    return bridge;
  }

  async fetch(request) {
    this.mark("fetch");
    tmark(`req ${request.method} ${new URL(request.url).pathname.split("/").slice(4).join("/")}`);
    const res = await super.fetch(request);
    tmark(`res ${res.status}`);
    this.mark("answered");
    return res;
  }

  async alarm() {
    tmark("alarm+");
    await super.alarm();
    tmark("alarm-");
  }
}

export default front;
