package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// Config configures one tree's driver.
type Config struct {
	// Module is the compiled guest, shared by every tree. Required.
	Module *runtime.Module
	// Conn is the tree's database connection; it outlives guests. Required.
	Conn runtime.Conn
	// Boot is what every guest of the tree boots with. Its Tools should be
	// Declare(Tools); its model, if openai, must match Model.BaseURL.
	Boot runtime.BootConfig
	// Model is the provider's side that stays on the host: the key, and
	// the client that carries EgressModel requests (nil: a plain
	// http.Client; the provider's URL is the operator's, not subject to the
	// tools' egress policy). Redirects are not followed, whatever the
	// client's CheckRedirect: a 3xx goes back to the guest as the answer,
	// as on every host (the provider's Doer does one round trip).
	Model ModelEgress
	// Tools are the host's real tools (webhooks with their secrets,
	// http_request with the egress policy), run for EgressTool requests.
	// What a call reaches as it runs (an http_request redirect to another
	// host) is put to Boot.Permissions, the operator's rules (permit.go).
	Tools []tool.Tool
	// ArmWake is told each time the guest arms the tree's wake-up (at, ms;
	// every arm, even one later than an earlier armed time) or clears it
	// (0). Required: a Tree never delivers a wake-up itself. Whoever keeps
	// the wake-up (host/, durably) delivers it with Tree.Wake, or starts a
	// new Tree when none runs, so one component owns delivery. It runs
	// inside the guest's call, before the guest goes on: a host that cannot
	// store the wake-up returns the error, which the guest hears as a
	// storage failure of the write it armed for (wake_arm_checked), so
	// that write does not commit and is retried.
	ArmWake func(at int64) error
	// Watchdog is runtime.Options.Watchdog.
	Watchdog time.Duration
	// Log receives the driver's and the guest's logs; nil discards them.
	// The caller's logger names the tree (the host's does): neither the
	// driver nor the guest adds it again.
	Log *slog.Logger
}

// ModelEgress is the host side of the model provider.
type ModelEgress struct {
	APIKey string
	Client *http.Client
}

// Declare lists the tools for BootConfig.Tools: what the guest must know
// of each (never a secret or a URL).
func Declare(tools []tool.Tool) []abi.ToolDecl {
	out := make([]abi.ToolDecl, 0, len(tools))
	for _, t := range tools {
		spec, limits := t.Spec(), t.Limits()
		d := abi.ToolDecl{Kind: abi.ToolWebhook, Name: spec.Name, Description: spec.Description, Schema: spec.Schema,
			Idempotent: t.Idempotent(), Timeout: limits.Timeout, OutputCap: limits.OutputCap}
		if _, ok := t.(*web.HTTPRequest); ok {
			d.Kind = abi.ToolHTTPRequest
		}
		if p, ok := t.(interface{ Permission() string }); ok { // a webhook's configured decision
			d.Permission = p.Permission()
		}
		out = append(out, d)
	}
	return out
}

// Tree runs one tree's guest in real time: real timers, real egress, an
// http.Handler for the API. It is safe for concurrent use; guest calls are
// serialized. A guest that dies (trap, watchdog) is replaced by a fresh
// one on the next use, booted on the same Conn.
type Tree struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex // serializes guest calls; guards the fields below
	g       *runtime.Guest
	gen     int // guest generation; timers and egress of an older one do nothing
	closed  bool
	nextReq uint64
	reqs    map[uint64]*stream
	timers  map[uint64]*time.Timer
	egress  map[uint64]context.CancelFunc

	// clock times the backlog rule of event streams (stream.go).
	clock core.Clock
	// cutHook runs after the backlog rule cut a stream (tests).
	cutHook func()
	// request delivers a request to the guest (tests replace it).
	request func(g *runtime.Guest, id uint64, req runtime.Request) error
}

// Start boots the tree's first guest.
func Start(ctx context.Context, cfg Config) (*Tree, error) {
	if cfg.Module == nil || cfg.Conn == nil {
		return nil, errors.New("serve: Module and Conn are required")
	}
	if cfg.ArmWake == nil {
		return nil, errors.New("serve: ArmWake is required: nothing would keep or deliver the wake-up")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Boot.Drain = true // ServeHTTP answers the guest's drain parts
	t := &Tree{cfg: cfg, log: log, reqs: map[uint64]*stream{},
		timers: map[uint64]*time.Timer{}, egress: map[uint64]context.CancelFunc{}, clock: realClock{}}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.guestLocked(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// guestLocked returns the running guest, booting a fresh one if needed.
func (t *Tree) guestLocked(ctx context.Context) (*runtime.Guest, error) {
	if t.closed {
		return nil, errors.New("serve: tree closed")
	}
	if t.g != nil && !t.g.Closed() {
		return t.g, nil
	}
	t.resetLocked()
	t.gen++
	g, err := t.cfg.Module.Instantiate(ctx, runtime.Options{Conn: t.cfg.Conn, Services: &services{t: t, gen: t.gen},
		Watchdog: t.cfg.Watchdog, Log: t.log})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if err := g.Boot(ctx, t.cfg.Boot); err != nil {
		g.Close(ctx)
		return nil, fmt.Errorf("serve: boot: %w", err)
	}
	t.g = g
	return g, nil
}

// resetLocked forgets everything of a dead guest: its timers, its egress,
// and its requests (ended with 503 if nothing was sent yet).
func (t *Tree) resetLocked() {
	for id, tm := range t.timers {
		tm.Stop()
		delete(t.timers, id)
	}
	for id, cancel := range t.egress {
		cancel()
		delete(t.egress, id)
	}
	for id, s := range t.reqs {
		s.abort()
		delete(t.reqs, id)
	}
}

// do runs f on the current guest of generation gen (0: any), under the
// lock; a guest that fails is replaced at the next use.
func (t *Tree) do(gen int, f func(g *runtime.Guest) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != 0 && gen != t.gen {
		return nil
	}
	g, err := t.guestLocked(context.Background())
	if err != nil {
		return err
	}
	// Guest calls get a context of their own: a client that goes away must
	// not cut a guest call short (that would kill the guest).
	err = f(g)
	t.dropIfDeadLocked(g, err)
	return err
}

// dropIfDeadLocked forgets g if the call that returned err left it closed
// (it failed), so the next use boots a fresh guest, and reports whether it
// did. Under t.mu.
func (t *Tree) dropIfDeadLocked(g *runtime.Guest, err error) bool {
	if err == nil || !g.Closed() {
		return false
	}
	t.log.Warn("guest failed; the next use boots a fresh one", "err", err)
	t.resetLocked()
	return true
}

// Wake delivers the tree's wake-up.
func (t *Tree) Wake(ctx context.Context) error {
	return t.do(0, func(g *runtime.Guest) error { return g.Wake(ctx) })
}

// Idle reports whether closing the tree now loses nothing that only memory
// holds: no request in flight here (an event stream counts until its
// client goes away) and no execution running in the guest
// (runtime.Guest.Idle). A tree without a live guest is idle. Claims may
// remain: their wake-up boots the tree again. A guest without the idle
// export (ABI < 1.1) answers runtime.ErrUnsupported.
func (t *Tree) Idle(ctx context.Context) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.g == nil || t.g.Closed() {
		return true, nil
	}
	if len(t.reqs) > 0 {
		return false, nil
	}
	idle, err := t.g.Idle(ctx)
	if t.dropIfDeadLocked(t.g, err) {
		return true, nil // nothing runs in a dead guest
	}
	return idle, err
}

// Close stops the tree gracefully (shutdown is recorded, claims are kept)
// and closes its guest.
func (t *Tree) Close(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	var err error
	if t.g != nil && !t.g.Closed() {
		err = t.g.Shutdown(ctx)
		err = errors.Join(err, t.g.Close(ctx))
	}
	t.closed = true
	t.resetLocked()
	return err
}

// ServeHTTP implements http.Handler: the request goes to the guest's API
// handler, and the response streams back as the guest writes it (an event
// stream flushes each event). A response the guest aborts after its head
// (an aborted end, ABI 1.11), or whose guest died after sending its head,
// panics with http.ErrAbortHandler, for the server to cut it short.
func (t *Tree) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	max := t.cfg.Boot.Settings.MaxBody
	if max <= 0 {
		max = api.DefaultMaxBody
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		writeError(w, api.ErrInvalidRequest, "could not read the request body")
		return
	}
	var id uint64
	var gen int
	t.mu.Lock()
	clock, cutHook := t.clock, t.cutHook
	t.mu.Unlock()
	cut := func() {
		t.log.Info("event stream ended: its client stopped reading", "waiting_over", maxBacklog, "nothing_taken_for", backlogPatience)
		t.cancel(id)
		if cutHook != nil {
			cutHook()
		}
	}
	s := newStream(clock, cut, func(timer uint64) { t.fire(gen, id, timer) })
	defer s.close()
	refused := false
	err = t.do(0, func(g *runtime.Guest) error {
		t.nextReq++
		id, gen = t.nextReq, t.gen
		t.reqs[id] = s
		req := runtime.Request{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header, Body: body}
		var err error
		if t.request != nil {
			err = t.request(g, id, req)
		} else {
			err = g.Request(context.Background(), id, req)
		}
		if err != nil && !g.Closed() {
			// The guest refused the request and lives on: nothing will
			// ever answer it there.
			delete(t.reqs, id)
			refused = true
		}
		return err
	})
	switch {
	case refused:
		t.log.Error("the guest refused a request", "err", err)
		s.fail(api.ErrInternal, "internal error")
	case err != nil:
		// No guest, or it died: its requests were ended (503).
		t.log.Warn("deliver request", "err", err)
		s.abort()
	}
	// Only an event stream is flushed as it goes. Any other answer is
	// left to net/http's buffering, as in process: one that ends within
	// its buffer goes out with a Content-Length, which a HEAD of it sends
	// too (a flush would send the head before the length is known).
	var flusher http.Flusher
	wroteHead := false
	for {
		p, ok, done := s.next()
		switch {
		case ok && p.Kind == abi.PartHead:
			for k, v := range p.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(p.Status)
			wroteHead = true
			if strings.HasPrefix(p.Header.Get("Content-Type"), "text/event-stream") {
				flusher, _ = w.(http.Flusher)
			}
			if flusher != nil {
				// An event stream's head goes out at once, as in process
				// (the API flushes it before any event): a stream with
				// nothing to send yet is open for its client now, not at
				// its first heartbeat.
				flusher.Flush()
			}
		case ok && p.Kind == abi.PartBody:
			if _, err := w.Write(p.Body); err != nil {
				t.cancel(id)
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			s.wrote(len(p.Body))
		case ok && p.Kind == abi.PartEnd && p.Aborted && wroteHead:
			// The guest's handler failed after its head (docs/abi.md §6):
			// abort the response as net/http aborts a handler's, so the
			// client sees it cut short (a dropped connection, a reset
			// stream), not a body that reads as complete.
			panic(http.ErrAbortHandler)
		case ok && p.Kind == abi.PartDrain:
			// The client took everything before it: the guest's
			// catch-up reads its next page.
			if s.drained(p.Timer) {
				t.fire(gen, id, p.Timer)
			}
		case ok:
		case done:
			// The guest ended the response, or the backlog rule cut it
			// (and cancels the guest's request): either way the client
			// sees its end.
			if !wroteHead {
				typ, msg := s.failure()
				if typ == "" {
					typ, msg = api.ErrUnavailable, "the tree's instance stopped; try again"
				}
				writeError(w, typ, msg)
				return
			}
			if s.diedShort() {
				// The guest died (a trap, its watchdog, a kill) between its
				// head and its end: what was sent is not the whole answer,
				// so it is cut short as an aborted end is, not ended as if
				// complete.
				panic(http.ErrAbortHandler)
			}
			return
		default:
			select {
			case <-s.notify:
			case <-r.Context().Done():
				t.cancel(id)
				return
			}
		}
	}
}

// fire delivers the timer that request id's drain part names, if the
// request still lives in the guest of generation gen that sent it: the
// answer to the part (docs/abi.md §3, Drain). A guest that died took the
// request with it; nothing is booted to answer.
func (t *Tree) fire(gen int, id, timer uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.g
	if t.closed || gen != t.gen || g == nil || g.Closed() || t.reqs[id] == nil {
		return
	}
	t.dropIfDeadLocked(g, g.Timer(context.Background(), timer))
}

// cancel tells the live guest that request id's client went away. Without
// one (the guest died) the request died with it: nothing is booted just to
// cancel it.
func (t *Tree) cancel(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.reqs[id]; !ok {
		return
	}
	delete(t.reqs, id)
	g := t.g
	if t.closed || g == nil || g.Closed() {
		return
	}
	t.dropIfDeadLocked(g, g.CancelRequest(context.Background(), id))
}

// writeError answers an error the API's way (core/api's ErrorBody).
func writeError(w http.ResponseWriter, typ api.ErrorType, msg string) {
	var body api.ErrorBody
	body.Error.Type, body.Error.Message = typ, msg
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(api.Statuses[typ])
	_ = json.NewEncoder(w).Encode(body)
}

// services is runtime.Services in real time for one guest generation. Its
// methods run under Tree.mu (inside a guest call).
type services struct {
	t   *Tree
	gen int
}

func (s *services) Now() int64 { return time.Now().UnixMilli() }

func (s *services) SetTimer(id uint64, at int64) {
	t, gen := s.t, s.gen
	d := time.Duration(max(at-time.Now().UnixMilli(), 0)) * time.Millisecond
	t.timers[id] = time.AfterFunc(d, func() {
		_ = t.do(gen, func(g *runtime.Guest) error {
			if _, ok := t.timers[id]; !ok {
				return nil
			}
			delete(t.timers, id)
			return g.Timer(context.Background(), id)
		})
	})
}

func (s *services) ClearTimer(id uint64) {
	if tm := s.t.timers[id]; tm != nil {
		tm.Stop()
		delete(s.t.timers, id)
	}
}

// ArmWake hands every arm to the host, which keeps and delivers the
// wake-up: even one later than an earlier armed time, since a host that
// uses up a delivered wake-up (DESIGN §4 rule 2) must see the handler's
// re-arm.
func (s *services) ArmWake(at int64) error { return s.t.cfg.ArmWake(at) }

// ClearWake tells the host the tree is gone; the host's Delete removes
// the wake-up itself, so nothing is stored here that could fail.
func (s *services) ClearWake() { _ = s.t.cfg.ArmWake(0) }

func (s *services) StartEgress(id uint64, req runtime.EgressRequest) {
	ctx, cancel := context.WithCancel(context.Background())
	s.t.egress[id] = cancel
	go s.t.runEgress(ctx, s.gen, id, req)
}

func (s *services) CancelEgress(id uint64) {
	if cancel := s.t.egress[id]; cancel != nil {
		cancel()
		delete(s.t.egress, id)
	}
}

func (s *services) Emit(runtime.Emitted) {}

func (s *services) Respond(id uint64, part runtime.ResponsePart) {
	if st := s.t.reqs[id]; st != nil {
		st.push(part)
		if part.Kind == abi.PartEnd {
			delete(s.t.reqs, id)
		}
	}
}

func (s *services) Random(p []byte) { _, _ = rand.Read(p) }

// runEgress performs one egress request and delivers its answer, unless it
// was cancelled (or its guest replaced) meanwhile.
func (t *Tree) runEgress(ctx context.Context, gen int, id uint64, req abi.EgressRequest) {
	deliver := func(f func(g *runtime.Guest) error) bool {
		ok := true
		_ = t.do(gen, func(g *runtime.Guest) error {
			if _, live := t.egress[id]; !live || ctx.Err() != nil {
				ok = false
				return nil
			}
			return f(g)
		})
		return ok
	}
	end := func(err error) {
		deliver(func(g *runtime.Guest) error {
			delete(t.egress, id)
			return g.EgressEnd(context.Background(), id, endOf(req.Kind, err))
		})
	}
	switch req.Kind {
	case abi.EgressModel:
		resp, err := t.modelRequest(ctx, req)
		if err != nil {
			end(err)
			return
		}
		defer resp.Body.Close()
		if !deliver(func(g *runtime.Guest) error {
			return g.EgressResponse(context.Background(), id, resp.StatusCode, http.Header(resp.Header))
		}) {
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				chunk := bytes.Clone(buf[:n])
				if !deliver(func(g *runtime.Guest) error { return g.EgressChunk(context.Background(), id, chunk) }) {
					return
				}
			}
			if err == io.EOF {
				end(nil)
				return
			}
			if err != nil {
				end(t.redact(err))
				return
			}
		}
	case abi.EgressTool:
		out, err := t.toolRequest(ctx, req)
		if err != nil {
			end(err)
			return
		}
		ok := deliver(func(g *runtime.Guest) error {
			if err := g.EgressResponse(context.Background(), id, http.StatusOK, http.Header{}); err != nil {
				return err
			}
			return g.EgressChunk(context.Background(), id, []byte(out))
		})
		if ok {
			end(nil)
		}
	default:
		end(fmt.Errorf("unknown egress kind %d", req.Kind))
	}
}

// modelRequest sends an EgressModel request to the configured provider,
// adding its key; any other URL is refused, and a redirect is the answer
// (never followed, so the key goes nowhere else).
func (t *Tree) modelRequest(ctx context.Context, req abi.EgressRequest) (*httpmsg.Response, error) {
	mc := t.cfg.Boot.Model
	want := strings.TrimRight(mc.BaseURL, "/") + "/chat/completions"
	if mc.Kind != abi.ModelOpenAI || req.URL != want {
		return nil, fmt.Errorf("egress: %s is not the configured model endpoint: %w", req.URL, web.ErrDenied)
	}
	hreq, err := httpmsg.NewRequest(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return nil, err
	}
	if req.Header != nil {
		hreq.Header = req.Header.Clone()
	}
	if t.cfg.Model.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+t.cfg.Model.APIKey)
	}
	resp, err := nethttp.Client(t.cfg.Model.Client).Do(hreq)
	if err != nil {
		return nil, &transportError{t.redact(err)}
	}
	return resp, nil
}

// toolRequest runs the HTTP side of a tool with the host's real tool, its
// Permit under the operator's rules and the session's and saved rules the
// call carries (permit.go).
func (t *Tree) toolRequest(ctx context.Context, req abi.EgressRequest) (string, error) {
	call, err := abi.DecodeToolCall(req.Body)
	if err != nil {
		return "", err
	}
	for _, tl := range t.cfg.Tools {
		if tl.Spec().Name == req.Target {
			return tl.Execute(ctx, tool.Call{ID: call.ID, Name: call.Name, Arguments: call.Arguments, IdempotencyKey: call.IdempotencyKey, SessionID: call.SessionID,
				Permit: t.permit(tl, call), SessionRules: call.SessionRules, SavedRules: call.SavedRules})
		}
	}
	return "", fmt.Errorf("egress: no tool %q on this host", req.Target)
}
