// revenant's Durable Object host: the SQL helpers Go calls (durableobject/
// db_js.go), one call per statement. Every Go→JS call and every JS object
// Go holds costs (a crossing, a finalizer): doing a statement's whole
// round (exec, step, read) here and handing Go a number or one byte array
// makes a statement one crossing instead of six or more per statement and
// two or more per value read.
//
// Plain functions of ctx.storage.sql and ctx.storage (no imports): the shim
// passes them to Go, and Go's tests evaluate this file under Node against
// stand-ins.

// txSync runs Go's transaction callback cb inside storage.transactionSync
// (ctx.storage). Go cannot throw into JS; the callback returns true to ask
// for a rollback, which this turns into the throw transactionSync needs.
// Never throws: returns undefined (committed), ROLLBACK, or the error
// transactionSync threw (a failed commit included).
export function txSync(storage, cb) {
  try {
    storage.transactionSync(() => {
      if (cb()) throw ROLLBACK;
    });
    return undefined;
  } catch (e) {
    return e;
  }
}

const ROLLBACK = "rollback"; // durableobject.rolledBack

// sqlExec runs query and returns the rows it changed, read with SQLite's
// changes(): the cursor's rowsWritten counts index rows too (3 for an
// INSERT that changes() counts 1). But workerd counts every change that
// changes() counts in rowsWritten as well (its SQLite patch adds to it
// wherever the change count grows), so a statement that wrote nothing
// changed nothing: it answers 0 without the second call, and without
// changes()'s stale count from an earlier statement (after a pragma, say).
export function sqlExec(sql, query, ...args) {
  const cursor = sql.exec(query, ...args);
  cursor.toArray();
  if (cursor.rowsWritten === 0) return 0;
  return sql.exec("SELECT changes()").raw().toArray()[0][0];
}

// sqlScript runs every statement of script (sql.exec runs them all).
export function sqlScript(sql, script) {
  sql.exec(script).toArray();
}

const encoder = new TextEncoder();

// sqlQuery runs query and writes its columns and rows into one byte
// array, little-endian: u32 column count, each name as a string; u32 row
// count, then each value as a tag byte and its data: 0 null, 1 a number
// (float64), 2 a string (u32 byte length, UTF-8), 3 a blob (u32 length,
// bytes). Booleans read as 1 and 0. Any other value throws.
//
// It returns the answer's length n, a number: the answer is the first n
// bytes of sqlQuery.buffer(sql), one buffer per database reused by every
// query (a new Uint8Array and DataView per query, and a JS object for Go
// to hold with its finalizer, cost more than the rows of most of them).
// When the buffer was replaced (to grow) since an answer last said so, it
// returns -1-n instead: the caller must fetch the buffer again. Growing
// reserves room for a string's longest UTF-8, so a buffer can be replaced
// by an answer shorter than the old one: only this flag tells. The buffer
// keeps the size of the largest answer so far. Per database, not per
// module: the objects of one isolate share this module.
export function sqlQuery(sql, query, ...args) {
  const cursor = sql.exec(query, ...args);
  const out = writerOf(sql);
  out.n = 0;
  const cols = cursor.columnNames;
  out.u32(cols.length);
  for (const c of cols) out.string(c);
  const at = out.n;
  out.u32(0); // the row count, written once known
  let rows = 0;
  for (const row of cursor.raw()) {
    rows++;
    for (const v of row) {
      if (v === null || v === undefined) out.u8(0);
      else if (typeof v === "number") out.u8(1), out.f64(v);
      else if (typeof v === "string") out.u8(2), out.string(v);
      else if (typeof v === "boolean") out.u8(1), out.f64(v ? 1 : 0);
      else if (v instanceof ArrayBuffer) out.u8(3), out.bytes(new Uint8Array(v));
      else if (ArrayBuffer.isView(v)) out.u8(3), out.bytes(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
      else throw new Error(`unsupported SQL value of JS type ${typeof v}`);
    }
  }
  out.view.setUint32(at, rows, true);
  if (!out.replaced) return out.n;
  out.replaced = false;
  return -1 - out.n;
}

// buffer is the array sqlQuery's answers on sql are written to.
sqlQuery.buffer = (sql) => writerOf(sql).buf;

const writers = new WeakMap(); // ctx.storage.sql → its Writer

function writerOf(sql) {
  let w = writers.get(sql);
  if (!w) writers.set(sql, (w = new Writer()));
  return w;
}

class Writer {
  constructor() {
    this.grow(256);
    this.n = 0;
  }
  grow(size) {
    const buf = new Uint8Array(size);
    if (this.buf) buf.set(this.buf.subarray(0, this.n));
    this.buf = buf;
    this.view = new DataView(buf.buffer);
    this.replaced = true; // until sqlQuery has said so
  }
  room(k) {
    if (this.n + k > this.buf.length) this.grow(Math.max(this.buf.length * 2, this.n + k));
  }
  u8(x) {
    this.room(1);
    this.buf[this.n++] = x;
  }
  u32(x) {
    this.room(4);
    this.view.setUint32(this.n, x, true);
    this.n += 4;
  }
  f64(x) {
    this.room(8);
    this.view.setFloat64(this.n, x, true);
    this.n += 8;
  }
  bytes(b) {
    this.u32(b.length);
    this.room(b.length);
    this.buf.set(b, this.n);
    this.n += b.length;
  }
  // string writes s as UTF-8 (u32 length, bytes) straight into the
  // buffer: at most 3 bytes per UTF-16 unit.
  string(s) {
    this.room(4 + 3 * s.length);
    const { written } = encoder.encodeInto(s, this.buf.subarray(this.n + 4));
    this.view.setUint32(this.n, written, true);
    this.n += 4 + written;
  }
}
