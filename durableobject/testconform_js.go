//go:build js && wasm && revenant_testroutes

package durableobject

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/storage/storagetest"
)

// The storage conformance suite inside workerd, on the object's own DB
// (transactionSync through the shim's txSync, sql.exec): the test route
// POST /v1/sessions/{id}/test/conform runs it on a conform.Recorder and
// answers what each test did.
//
// The suite's tables (v, p, s and the index v_who) are none of revenant's
// (core's migrations), so they share the tree's database as a scratch
// namespace: each test starts with them dropped and drops them again at
// its end. The DB is the object's own, so its lock serializes the suite's
// transactions with the tree's; the e2e test runs it on a tree created for
// it, with no turn.

// scratchTables are every table the suite creates.
var scratchTables = []string{"v", "p", "s"}

// conformSkips are the suite's tests this host knowingly departs from:
// what DO SQL does on workerd (measured with this route, 2026-04-26),
// which no DB over sql.exec can change. Core is unaffected: every column
// of its schema has a declared type (INTEGER affinity turns a bound REAL
// 7.0 back into 7), it stores no integer past 2^53 (ms times, counters),
// and it classifies errors by primary code only.
var conformSkips = []storagetest.Skip{
	{Test: "values/each value round-trips with its SQLite type",
		Why: "DO SQL binds every JS number as REAL (an int64 in an untyped column reads typeof 'real', an integral REAL reads back as int64) and takes no BigInt, so integers past 2^53 are refused"},
	{Test: "values/int and bool arguments bind as integers",
		Why: "DO SQL binds every JS number as REAL: typeof(?) of 7 is 'real'"},
	{Test: "values/Scan reads each value into every destination",
		Why: "DO SQL reads an integer past 2^53 as the nearest JS number (9007199254740993 reads 9007199254740992)"},
	{Test: "errors/a constraint violation is coded and permanent",
		Why: "DO SQL's error text names the primary code only (SQLITE_CONSTRAINT), not the extended one; the code, permanence and rollback hold"},
}

// ConformResult is the route's answer.
type ConformResult struct {
	Tests []ConformTest `json:"tests"` // every test case (leaves), in the order they ran
}

// ConformTest is one test case of the suite.
type ConformTest struct {
	Name    string   `json:"name"`
	Failed  bool     `json:"failed"`
	Skipped bool     `json:"skipped"`
	Logs    []string `json:"logs,omitempty"`
}

// serveConform answers the suite's results on the object's DB, or with
// ?broken=no-rollback on a DB that commits what a failed fn wrote (the
// suite must catch it: the e2e test checks it can fail in workerd).
func serveConform(o *Object, w httpmsg.ResponseWriter, r *httpmsg.Request) {
	var db storage.DB = o.db
	switch b := r.URL.Query().Get("broken"); b {
	case "":
	case "no-rollback":
		db = noRollback{o.db}
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(httpmsg.StatusBadRequest)
		_, _ = w.Write([]byte("unknown broken=" + b + "\n"))
		return
	}
	res := RunConform(db)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// RunConform runs the storage suite on db, in the scratch namespace.
func RunConform(db storage.DB) ConformResult {
	var names []string
	var mu sync.Mutex
	r := conform.Record("storage", func(t conform.T) {
		storagetest.RunT(listing{T: t, names: &names, mu: &mu}, func(t conform.T) storage.DB {
			dropScratch(t, db)
			t.Cleanup(func() { dropScratch(t, db) })
			return db
		}, conformSkips...)
	})
	skipped := r.Skipped()
	var res ConformResult
	for _, n := range names {
		leaf := !slices.ContainsFunc(names, func(m string) bool { return strings.HasPrefix(m, n+"/") })
		if !leaf {
			continue
		}
		x := r.Find(n)
		res.Tests = append(res.Tests, ConformTest{Name: n, Failed: x.Failed(), Skipped: slices.Contains(skipped, n), Logs: x.Logs()})
	}
	if logs := r.Logs(); len(logs) > 0 { // the suite's own complaints (a stale Skip)
		res.Tests = append(res.Tests, ConformTest{Name: "storage", Failed: r.Failed(), Logs: logs})
	}
	return res
}

// dropScratch drops the suite's tables, so each test starts on none.
func dropScratch(t conform.T, db storage.DB) {
	err := db.Tx(context.Background(), func(tx storage.Tx) error {
		for _, name := range scratchTables {
			if _, err := tx.Exec("DROP TABLE IF EXISTS " + name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("drop the suite's tables: %v", err)
	}
}

// listing is a conform.T that notes the name of every test it runs.
type listing struct {
	conform.T
	names *[]string
	mu    *sync.Mutex
}

func (l listing) Run(name string, f func(conform.T)) bool {
	return l.T.Run(name, func(t conform.T) {
		l.mu.Lock()
		*l.names = append(*l.names, t.Name())
		l.mu.Unlock()
		f(listing{T: t, names: l.names, mu: l.mu})
	})
}

// noRollback is a broken DB: a transaction whose fn failed commits what fn
// wrote (and still returns fn's error).
type noRollback struct{ db storage.DB }

func (n noRollback) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	var fnErr error
	if err := n.db.Tx(ctx, func(tx storage.Tx) error { fnErr = fn(tx); return nil }); err != nil {
		return err
	}
	return fnErr
}
