// revenant's shim with marks, for the cold-start profile of
// make bench-workerd (REVENANT_BENCH_PROFILE=1); test-only, not shipped.
// Each mark is a console line the harness timestamps as it arrives
// (Date.now does not move during synchronous JS on workerd, so the
// object cannot time its own Go work). It also counts sql.exec calls
// and transactionSync calls per phase.
import { Tree as Base } from "../../../durableobject/shim.js";
import front, { Directory } from "../../../worker/entry.mjs";

export { Directory };

let seq = 0;

export class Tree extends Base {
  constructor(ctx, env) {
    super(ctx, env); // the base checks ctx's type: the counting proxy replaces it after
    const counts = { exec: 0, tx: 0 };
    const bind = (target, p) => {
      const v = Reflect.get(target, p);
      return typeof v === "function" ? v.bind(target) : v;
    };
    const sql = new Proxy(ctx.storage.sql, {
      get: (t, p) => (p === "exec" ? (...a) => (counts.exec++, t.exec(...a)) : bind(t, p)),
    });
    const storage = new Proxy(ctx.storage, {
      get: (t, p) =>
        p === "sql" ? sql : p === "transactionSync" ? (fn) => (counts.tx++, t.transactionSync(fn)) : bind(t, p),
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
    const res = await super.fetch(request);
    this.mark("answered");
    return res;
  }
}

export default front;
