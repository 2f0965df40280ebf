// A plain JS Durable Object doing revenant's turn the way a typical
// hand-written object does: the baseline of e2e/workerd_bench_test.go
// (make bench-workerd), not part of revenant. One object per session:
// store the prompt, call an OpenAI-compatible model (streaming), store the
// answer; an alarm set 1 s ahead (as revenant's wake interval) re-runs a
// turn that an eviction or a crash cut off. A resumed turn asks the model
// again and loses the streamed partial text: it is typical, not crash-proof.
import { DurableObject } from "cloudflare:workers";

const WAKE_MS = 1000;

export class PlainTree extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.streams = new Set(); // SSE writers
    this.running = null; // the turn loop's promise
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)");
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS prompts (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, text TEXT, answer TEXT, state TEXT)",
    );
    console.log(`plainjs: object started tree=${this.tree() ?? "-"}`);
  }

  tree() {
    return this.ctx.storage.sql.exec("SELECT v FROM meta WHERE k = 'tree'").toArray()[0]?.v;
  }

  async fetch(request) {
    const url = new URL(request.url);
    const sql = this.ctx.storage.sql;
    const tail = url.pathname.split("/").slice(4).join("/"); // after /v1/sessions/{id}
    const body = request.method === "POST" ? await request.text() : ""; // read it all before answering
    if (request.method === "POST" && url.pathname === "/v1/sessions") {
      const id = request.headers.get("x-tree");
      sql.exec("INSERT OR IGNORE INTO meta (k, v) VALUES ('tree', ?)", id);
      return json(201, { id });
    }
    if (!this.tree()) return json(404, { error: { type: "not_found", message: "no such session" } });
    if (request.method === "GET" && tail === "") {
      const prompts = sql.exec("SELECT id, text, answer, state FROM prompts ORDER BY seq").toArray();
      const busy = prompts.some((p) => p.state === "pending");
      return json(200, { id: this.tree(), status: busy ? "running" : "idle", prompts });
    }
    if (request.method === "POST" && tail === "prompt") {
      const { text } = JSON.parse(body);
      const id = crypto.randomUUID();
      sql.exec("INSERT INTO prompts (id, text, state) VALUES (?, ?, 'pending')", id, text);
      await this.ctx.storage.setAlarm(Date.now() + WAKE_MS);
      this.run("prompt"); // not awaited: the turn outlives the 202
      return json(202, { prompt_id: id });
    }
    if (request.method === "GET" && tail === "events") {
      const { readable, writable } = new TransformStream();
      const w = writable.getWriter();
      this.streams.add(w);
      w.closed.catch(() => this.streams.delete(w));
      w.write(enc.encode(": ok\n\n")).catch(() => this.streams.delete(w));
      return new Response(readable, { headers: { "content-type": "text/event-stream" } });
    }
    return json(404, { error: { type: "not_found", message: "no such route" } });
  }

  async alarm() {
    await this.run("alarm");
    const left = this.ctx.storage.sql.exec("SELECT count(*) AS n FROM prompts WHERE state = 'pending'").one().n;
    if (left > 0) await this.ctx.storage.setAlarm(Date.now() + WAKE_MS);
  }

  // run answers the pending prompts in order, one turn each.
  run(cause) {
    this.running ??= this.turns(cause).finally(() => (this.running = null));
    return this.running;
  }

  async turns(cause) {
    const sql = this.ctx.storage.sql;
    for (;;) {
      const p = sql.exec("SELECT id, text FROM prompts WHERE state = 'pending' ORDER BY seq LIMIT 1").toArray()[0];
      if (!p) break;
      let answer;
      try {
        answer = await this.callModel(p.text);
      } catch (e) {
        console.error("plainjs: model failed:", e);
        return; // the alarm retries
      }
      sql.exec("UPDATE prompts SET answer = ?, state = 'done' WHERE id = ?", answer, p.id);
      console.log(`plainjs: turn done tree=${this.tree()} prompt=${p.id} cause=${cause}`);
      const frame = enc.encode(`event: done\ndata: ${JSON.stringify({ prompt_id: p.id, text: answer })}\n\n`);
      for (const w of this.streams) w.write(frame).catch(() => this.streams.delete(w));
    }
    // Not awaited: nothing may run between the last look at the table
    // and the end of this loop, or a prompt could be left without a turn.
    this.ctx.storage.deleteAlarm().catch((e) => console.error("plainjs: deleteAlarm:", e));
  }

  // callModel streams one chat completion and returns its text.
  async callModel(text) {
    const history = this.ctx.storage.sql
      .exec("SELECT text, answer FROM prompts WHERE state = 'done' ORDER BY seq")
      .toArray()
      .flatMap((p) => [{ role: "user", content: p.text }, { role: "assistant", content: p.answer }]);
    const res = await fetch(`${this.env.OPENAI_BASE_URL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "fake", stream: true, messages: [...history, { role: "user", content: text }] }),
    });
    if (!res.ok) throw new Error(`model answered ${res.status}`);
    let answer = "";
    let buf = "";
    const dec = new TextDecoder();
    for await (const chunk of res.body) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line.startsWith("data:") || line === "data: [DONE]") continue;
        answer += JSON.parse(line.slice(5)).choices?.[0]?.delta?.content ?? "";
      }
    }
    return answer;
  }
}

const enc = new TextEncoder();

function json(status, body) {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

// The front: POST /v1/sessions mints the id; /v1/sessions/{id}/… goes to
// that id's object.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    let id;
    if (request.method === "POST" && url.pathname === "/v1/sessions") {
      const b = crypto.getRandomValues(new Uint8Array(16));
      id = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
    } else {
      id = url.pathname.match(/^\/v1\/sessions\/([A-Za-z0-9_-]{1,64})(\/|$)/)?.[1];
      if (!id) return json(404, { error: { type: "not_found", message: "no such session" } });
    }
    const headers = new Headers(request.headers);
    headers.set("x-tree", id);
    return env.TREES.get(env.TREES.idFromName(id)).fetch(new Request(request, { headers }));
  },
};
