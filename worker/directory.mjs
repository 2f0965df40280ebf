// revenant's session directory: one Directory Durable Object per
// principal (idFromName("principal:" + p)), holding the root ids of the
// trees that principal owns in its SQLite storage. A small JS class: it
// only stores rows; the front's Go program (worker/serve_js.go) decides
// what to ask, checks ids and builds the API's answers. Only the front
// reaches it, with root ids it has validated.
//
//   GET    /trees/{root}                        200 {root_id, principal, created_at} | 404
//   PUT    /trees/{root}?principal=&created_at=[&key=&digest=]
//                                                201 | 409 (the id is taken, or barred) |
//                                                409 {root_id, digest, exists} (the key is taken)
//   DELETE /trees/{root}                        204 (also when there was no row)
//   DELETE /trees/{root}?unmade=1               204 (no row: the id is barred) | 409 (its row is there, kept)
//   GET    /trees?limit=&after_at=&after_id=     200 {trees: [{root_id, created_at}], more}
//          newest first (created_at DESC, root_id), after the given tree
//   GET    /keys?key=                           200 {root_id, digest, exists} | 404
//
// A create's Idempotency-Key (the API's create key, this principal's) is
// recorded by the PUT of its tree's row, in the same transaction: the
// key's tree, and the digest of the create's body. A client's delete of
// the tree leaves the key, spent (exists: false). Keys never expire; each
// is one small row, written only by a create that made a tree.
//
// A create whose PUT failed asks, before it deletes its tree, that the id
// be barred (unmade=1): in one step, a row there (the PUT committed, its
// answer lost) is kept and answered 409, the create having succeeded; no
// row, the id is barred for good, so that a PUT still on its way cannot
// record a tree the front then deletes (nor its key, which stays free).
// One small row per such create, never removed: ids are never reused.
import { DurableObject } from "cloudflare:workers";

const ROOT = /^\/trees\/([A-Za-z0-9_-]{1,64})$/;

// LOSE_PUT_HEADER on a PUT, which the front sends in the tests' build
// only (REVENANT_TEST_LOSE_PUT, its value): "on" makes the Directory
// lose its answer to a row it committed (it makes the row durable, then
// resets itself); "late" answers its first PUT 500, nothing written, and
// has that PUT land once its root's next request is served, as a PUT
// still on its way when the front took it for failed may; "fail" answers
// its first PUT 500, nothing written, and that PUT never lands.
export const LOSE_PUT_HEADER = "x-revenant-test-lose-put";

// FAIL_ONCE_HEADER on a GET or a DELETE of /trees/{root}, a key's read
// (GET /keys) or a list (GET /trees), which the front sends in the tests'
// build only (REVENANT_TEST_FAIL_OWNER_READ, REVENANT_TEST_FAIL_ROW_DELETE,
// REVENANT_TEST_FAIL_KEY_READ, REVENANT_TEST_FAIL_LIST), makes the
// Directory fail the first such request for each root or key, or the
// first list (nothing read or deleted), as a storage error would: a
// tree's or a key's request is answered 500, a list throws, as its
// sql.exec would, so that the front's fetch rejects. The next one is
// served. Its value "always" fails every one; "miss", on a key's read,
// answers the first that finds the key 404, as though it were not there
// (as a same-key create racing this one would find it).
export const FAIL_ONCE_HEADER = "x-revenant-test-fail-once";

export class Directory extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS trees (
      root_id TEXT PRIMARY KEY, principal TEXT NOT NULL, created_at INTEGER NOT NULL)`);
    this.sql.exec(`CREATE INDEX IF NOT EXISTS trees_newest ON trees (created_at DESC, root_id)`);
    this.sql.exec(`CREATE TABLE IF NOT EXISTS create_keys (
      key TEXT PRIMARY KEY, root_id TEXT NOT NULL, digest TEXT NOT NULL)`);
    this.sql.exec(`CREATE INDEX IF NOT EXISTS create_keys_by_root ON create_keys (root_id)`);
    this.sql.exec(`CREATE TABLE IF NOT EXISTS unmade (root_id TEXT PRIMARY KEY)`);
  }

  // keyRecord is the create key's record, or undefined: its tree, its
  // body's digest, and whether the tree still has its row.
  keyRecord(key) {
    const row = this.sql
      .exec(`SELECT root_id, digest, EXISTS (SELECT 1 FROM trees WHERE trees.root_id = create_keys.root_id) AS present
             FROM create_keys WHERE key = ?`, key)
      .toArray()[0];
    return row && { root_id: row.root_id, digest: row.digest, exists: row.present === 1 };
  }

  async fetch(request) {
    const url = new URL(request.url);
    const q = url.searchParams;
    if (url.pathname === "/trees" && request.method === "GET") {
      if (this.failOnce(request, "LIST")) throw new Error("revenant test: the directory's storage failed a list");
      // The front always sends the limit it checked (1 to api.MaxListLimit,
      // worker/list.go): no second copy of that bound here to drift from it
      // (a smaller one would cut every page short, with a cursor).
      const limit = Number(q.get("limit"));
      if (!Number.isSafeInteger(limit) || limit < 1) return new Response(null, { status: 400 });
      const rows = q.has("after_at")
        ? this.sql
            .exec(
              `SELECT root_id, created_at FROM trees WHERE created_at < ? OR (created_at = ? AND root_id > ?)
               ORDER BY created_at DESC, root_id LIMIT ?`,
              Number(q.get("after_at")), Number(q.get("after_at")), q.get("after_id") ?? "", limit + 1)
            .toArray()
        : this.sql.exec(`SELECT root_id, created_at FROM trees ORDER BY created_at DESC, root_id LIMIT ?`, limit + 1).toArray();
      return Response.json({ trees: rows.slice(0, limit), more: rows.length > limit });
    }
    if (url.pathname === "/keys" && request.method === "GET") {
      const key = q.get("key") ?? "";
      const rec = this.keyRecord(key);
      const miss = request.headers.get(FAIL_ONCE_HEADER) === "miss";
      if ((rec || !miss) && this.failOnce(request, "KEY " + key)) return new Response(null, { status: miss ? 404 : 500 });
      return rec ? Response.json(rec) : new Response(null, { status: 404 });
    }
    const m = url.pathname.match(ROOT);
    if (!m) return new Response(null, { status: 404 });
    const root = m[1];
    const res = await this.tree(request, q, root);
    const late = this.late;
    if (late?.root === root && request.method !== "PUT") {
      this.late = {};
      console.log(`revenant test: a late PUT lands: ${root} ${this.put(root, late.q).status}`);
    }
    return res;
  }

  // tree answers a request for tree root's row.
  async tree(request, q, root) {
    if (this.failOnce(request, request.method + " " + root)) return new Response(null, { status: 500 });
    const lose = request.headers.get(LOSE_PUT_HEADER);
    switch (request.method) {
      case "GET": {
        const row = this.sql.exec(`SELECT root_id, principal, created_at FROM trees WHERE root_id = ?`, root).toArray()[0];
        return row ? Response.json(row) : new Response(null, { status: 404 });
      }
      case "PUT": {
        if ((lose === "late" || lose === "fail") && !this.late) {
          this.late = lose === "late" ? { root, q } : {};
          return new Response(null, { status: 500 });
        }
        const res = this.put(root, q);
        if (lose === "on" && res.status === 201) {
          await this.ctx.storage.sync();
          this.ctx.abort("revenant test: the directory's answer to a PUT lost");
        }
        return res;
      }
      case "DELETE":
        if (!q.has("unmade")) {
          this.sql.exec(`DELETE FROM trees WHERE root_id = ?`, root); // a client's delete: the key stays, spent
        } else if (this.has(root)) {
          return new Response(null, { status: 409 });
        } else {
          this.sql.exec(`INSERT OR IGNORE INTO unmade (root_id) VALUES (?)`, root);
        }
        return new Response(null, { status: 204 });
    }
    return new Response(null, { status: 405 });
  }

  // has says whether a row records tree root.
  has(root) {
    return this.sql.exec(`SELECT 1 FROM trees WHERE root_id = ?`, root).toArray().length > 0;
  }

  // put records tree root's row and, with a key, the key: 201, or 409
  // when the id is taken or barred (unmade), or the key taken.
  put(root, q) {
    if (this.has(root) || this.sql.exec(`SELECT 1 FROM unmade WHERE root_id = ?`, root).toArray().length > 0) {
      return new Response(null, { status: 409 });
    }
    const key = q.get("key");
    if (key !== null) {
      const rec = this.keyRecord(key);
      if (rec) return Response.json(rec, { status: 409 }); // a create with the same key was recorded first
    }
    // The row and its key in one transaction: a retry finds both or
    // neither.
    this.ctx.storage.transactionSync(() => {
      this.sql.exec(`INSERT INTO trees (root_id, principal, created_at) VALUES (?, ?, ?)`,
        root, q.get("principal") ?? "", Number(q.get("created_at") ?? Date.now()));
      if (key !== null) this.sql.exec(`INSERT INTO create_keys (key, root_id, digest) VALUES (?, ?, ?)`, key, root, q.get("digest") ?? "");
    });
    return new Response(null, { status: 201 });
  }

  // failOnce says whether request, which carries FAIL_ONCE_HEADER, is the
  // first of its kind (key) to do so: that one is to fail (logged).
  failOnce(request, key) {
    if (!request.headers.has(FAIL_ONCE_HEADER)) return false;
    this.failedOnce ??= new Set();
    if (this.failedOnce.has(key) && request.headers.get(FAIL_ONCE_HEADER) !== "always") return false;
    this.failedOnce.add(key);
    console.log(`revenant test: the directory failed a request: ${key}`);
    return true;
  }
}
