package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

var (
	moduleOnce sync.Once
	module     *runtime.Module
	moduleErr  error
)

// compiled compiles the guest once per test binary.
func compiled(tb testing.TB) *runtime.Module {
	tb.Helper()
	wasm := guestbuild.Must(tb)
	moduleOnce.Do(func() {
		module, moduleErr = runtime.Compile(context.Background(), wasm, runtime.CompileOptions{CacheDir: guestbuild.CacheDir()})
	})
	require.NoError(tb, moduleErr)
	return module
}

// services is a deterministic runtime.Services: a virtual clock, seeded
// randomness, and a record of everything the guest did.
type services struct {
	mu     sync.Mutex
	now    int64
	rng    *rand.ChaCha8
	timers map[uint64]int64
	wake   int64
	clears int // ClearWake calls: the guest said its tree is gone
	// armErr, if set, is ArmWake's answer: the wake-up is not stored.
	armErr error
	egress map[uint64]runtime.EgressRequest
	// onEgress, if set, is told about each started egress.
	onEgress func(id uint64, req runtime.EgressRequest)
	// onEmit, if set, is told about each emitted event (after the record).
	onEmit    func(ev runtime.Emitted)
	cancelled []uint64
	emits     []runtime.Emitted
	responses map[uint64]*response
	log       bytes.Buffer // every call, for byte-identical comparisons
}

type response struct {
	status int
	header http.Header
	body   bytes.Buffer
	ended  bool
}

func newServices(seed uint64) *services {
	var s [32]byte
	s[0] = byte(seed)
	return &services{now: 1_700_000_000_000, rng: rand.NewChaCha8(s), timers: map[uint64]int64{},
		egress: map[uint64]runtime.EgressRequest{}, responses: map[uint64]*response{}}
}

func (s *services) Now() int64 { return s.now }

func (s *services) SetTimer(id uint64, at int64) {
	s.timers[id] = at
	fmt.Fprintf(&s.log, "timer_set %d %d\n", id, at)
}

func (s *services) ClearTimer(id uint64) {
	delete(s.timers, id)
	fmt.Fprintf(&s.log, "timer_clear %d\n", id)
}

func (s *services) ArmWake(at int64) error {
	if s.armErr != nil {
		fmt.Fprintf(&s.log, "wake_arm %d refused\n", at)
		return s.armErr
	}
	if s.wake == 0 || at < s.wake {
		s.wake = at
	}
	fmt.Fprintf(&s.log, "wake_arm %d\n", at)
	return nil
}

func (s *services) ClearWake() { s.wake, s.clears = 0, s.clears+1 }

func (s *services) StartEgress(id uint64, req runtime.EgressRequest) {
	s.egress[id] = req
	fmt.Fprintf(&s.log, "egress_start %d %s %s\n", id, req.Method, req.URL)
	if s.onEgress != nil {
		s.onEgress(id, req)
	}
}

func (s *services) CancelEgress(id uint64) {
	s.cancelled = append(s.cancelled, id)
	delete(s.egress, id)
	fmt.Fprintf(&s.log, "egress_cancel %d\n", id)
}

func (s *services) Emit(ev runtime.Emitted) {
	s.emits = append(s.emits, ev)
	fmt.Fprintf(&s.log, "emit %s %d %s %s %s\n", ev.SessionID, ev.Seq, ev.ID, ev.Type, ev.Data)
	if s.onEmit != nil {
		s.onEmit(ev)
	}
}

func (s *services) Respond(id uint64, part runtime.ResponsePart) {
	r := s.responses[id]
	if r == nil {
		r = &response{}
		s.responses[id] = r
	}
	switch part.Kind {
	case abi.PartHead:
		r.status, r.header = part.Status, http.Header(part.Header)
	case abi.PartBody:
		r.body.Write(part.Body)
	case abi.PartEnd:
		r.ended = true
	}
	fmt.Fprintf(&s.log, "respond %d %d %d %q\n", id, part.Kind, part.Status, part.Body)
}

func (s *services) Random(p []byte) { _, _ = s.rng.Read(p) }

// nextTimer returns the earliest timer (ties by id), or false.
func (s *services) nextTimer() (uint64, int64, bool) {
	var ids []uint64
	for id := range s.timers {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return 0, 0, false
	}
	slices.SortFunc(ids, func(a, b uint64) int {
		if s.timers[a] != s.timers[b] {
			return int(s.timers[a] - s.timers[b])
		}
		return int(a - b)
	})
	return ids[0], s.timers[ids[0]], true
}

// env is one tree: a database, services, and a guest over them.
type env struct {
	t    testing.TB
	path string
	db   *sqlitedb.DB
	conn *sqlitedb.Conn
	s    *services
	g    *runtime.Guest
	cfg  runtime.BootConfig
	next uint64 // request ids
}

const treeID = "tree1"

func newEnv(t testing.TB, seed uint64, cfg runtime.BootConfig) *env {
	t.Helper()
	if cfg.TreeID == "" {
		cfg.TreeID = treeID
	}
	return openEnv(t, filepath.Join(t.TempDir(), "tree.db"), seed, cfg)
}

// sibling is another host over the env's database file: its own
// connection and services, as a second process would have, for a guest
// that supersedes (or is superseded by) the env's.
func (e *env) sibling(seed uint64) *env {
	e.t.Helper()
	return openEnv(e.t, e.path, seed, e.cfg)
}

// openEnv is a host with its own connection to the database at path.
func openEnv(t testing.TB, path string, seed uint64, cfg runtime.BootConfig) *env {
	t.Helper()
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return &env{t: t, path: path, db: db, conn: db.Conn(), s: newServices(seed), cfg: cfg}
}

// answer answers egress request id as a streaming provider would: 200
// text/event-stream, each event a chunk, then the end.
func (e *env) answer(id uint64, events ...string) {
	e.t.Helper()
	ctx := context.Background()
	require.NoError(e.t, e.g.EgressResponse(ctx, id, 200, http.Header{"Content-Type": {"text/event-stream"}}))
	for _, ev := range events {
		require.NoError(e.t, e.g.EgressChunk(ctx, id, []byte(ev+"\n\n")))
	}
	require.NoError(e.t, e.g.EgressEnd(ctx, id, runtime.EgressEnd{}))
}

// answerToolCall answers model egress id as an OpenAI stream that calls
// tool name (id c1) with args, a JSON object's text, and finishes.
func (e *env) answerToolCall(id uint64, name, args string) {
	e.t.Helper()
	call, err := json.Marshal(map[string]any{"index": 0, "id": "c1", "type": "function",
		"function": map[string]string{"name": name, "arguments": args}})
	require.NoError(e.t, err)
	e.answer(id,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[`+string(call)+`]}}]}`,
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`data: [DONE]`)
}

// boot instantiates a fresh guest on the env's database and boots it.
func (e *env) boot(opts runtime.Options) error {
	e.t.Helper()
	opts.Conn, opts.Services = e.conn, e.s
	g, err := compiled(e.t).Instantiate(context.Background(), opts)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { g.Close(context.Background()) })
	e.g = g
	return g.Boot(context.Background(), e.cfg)
}

// do sends one request and returns its response as far as the guest got.
func (e *env) do(method, path string, body any) *response {
	e.t.Helper()
	var b []byte
	if body != nil {
		var err error
		b, err = json.Marshal(body)
		require.NoError(e.t, err)
	}
	e.next++
	id := e.next
	p, q, _ := bytes.Cut([]byte(path), []byte("?"))
	err := e.g.Request(context.Background(), id, runtime.Request{Method: method, Path: string(p), RawQuery: string(q),
		Header: http.Header{"Content-Type": {"application/json"}}, Body: b})
	require.NoError(e.t, err)
	r := e.s.responses[id]
	require.NotNil(e.t, r, "no response head for %s %s", method, path)
	return r
}

// fireTimers advances the virtual clock through every timer (and the
// wake-up) until none is left before limit ms from now.
func (e *env) fireTimers(limit int64) {
	e.t.Helper()
	end := e.s.now + limit
	for {
		id, at, ok := e.s.nextTimer()
		if !ok || at > end {
			return
		}
		if at > e.s.now {
			e.s.now = at
		}
		delete(e.s.timers, id)
		require.NoError(e.t, e.g.Timer(context.Background(), id))
	}
}

func decode[T any](t testing.TB, r *response) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.body.Bytes(), &v), "body %s", r.body.String())
	return v
}

type snapshot struct {
	Status string `json:"status"`
	Turns  int    `json:"turns"`
	Cursor int64  `json:"cursor"`
	Claim  *struct {
		ExecutionID string `json:"execution_id"`
	} `json:"claim"`
	Prompts []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	} `json:"prompts"`
	Messages []struct {
		Role string `json:"role"`
		Text string `json:"text"`
	} `json:"messages"`
}

func (e *env) snapshot() snapshot {
	e.t.Helper()
	r := e.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(e.t, 200, r.status, r.body.String())
	require.True(e.t, r.ended)
	return decode[snapshot](e.t, r)
}

func (e *env) createAndPrompt(text string) {
	e.t.Helper()
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(e.t, 201, r.status, r.body.String())
	require.Equal(e.t, treeID, decode[map[string]string](e.t, r)["id"])
	r = e.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": text, "id": "p1"})
	require.Equal(e.t, 202, r.status, r.body.String())
}

// terminals counts the turn terminals stored in the database.
func (e *env) terminals() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	err := e.db.Tx(context.Background(), func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT type, count(*) FROM events WHERE type IN ('session.execution.succeeded@1', 'session.execution.failed@1', 'session.execution.interrupted@1') GROUP BY type`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var typ string
			var n int
			if err := rows.Scan(&typ, &n); err != nil {
				return err
			}
			out[typ] = n
		}
		return nil
	})
	require.NoError(e.t, err)
	return out
}

func (s *services) emitted(typ string) []runtime.Emitted {
	var out []runtime.Emitted
	for _, ev := range s.emits {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}
