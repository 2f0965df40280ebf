//go:build wasip1

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web/httpargs"
	"github.com/revenantrt/revenant/wasm/abi"
)

// egresses tracks the guest's outbound requests. Start asks the host with
// the egress_start import; the answer arrives through the egress exports,
// which only queue it (they never block), and the waiting goroutine wakes.
type egresses struct {
	mu   sync.Mutex
	next uint64
	byID map[uint64]*egress
	// epoch, if set, is the instance's epoch (core.Instance.Epoch), sent
	// with every request for the host's fence (ABI 1.2). It is nil for a
	// host older than 1.2, whose decoder would refuse the field.
	epoch func() int64
	// onFenced, if set, is told of every end with code abi.EndFenced.
	onFenced func(id uint64, msg string)
}

type egress struct {
	id     uint64
	mu     sync.Mutex
	notify chan struct{} // capacity 1: "something changed"
	head   *abi.EgressResponse
	buf    []byte
	ended  bool
	err    error // why it ended; nil: a clean end
}

// endError is a failed egress end as the guest's callers see it: the
// host's message, and for a fenced end core.ErrFenced, decided by the
// end's code and never by its text (errors.Is(err, core.ErrFenced)).
type endError struct {
	code abi.EndCode
	msg  string
}

func (e *endError) Error() string { return e.msg }

func (e *endError) Unwrap() error {
	if e.code == abi.EndFenced {
		return core.ErrFenced
	}
	return nil
}

// errCancelled ends an egress the guest abandoned.
var errCancelled = errors.New("egress cancelled")

func (e *egress) signal() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

func (es *egresses) start(req abi.EgressRequest) *egress {
	es.mu.Lock()
	es.next++
	e := &egress{id: es.next, notify: make(chan struct{}, 1)}
	es.byID[e.id] = e
	es.mu.Unlock()
	if es.epoch != nil {
		// Read as the request starts: an instance that booted read-only
		// holds abi.NoEpoch until its first accepted write, which the
		// runner makes before every model request and tool body, so a
		// request without an epoch is refused by the host, as it should be.
		req.Epoch, req.HasEpoch = es.epoch(), true
	}
	p, n := bytesPtr(req.Encode())
	hostEgressStart(e.id, p, n)
	return e
}

// cancel forgets e and tells the host, unless it already ended.
func (es *egresses) cancel(e *egress) {
	es.mu.Lock()
	_, live := es.byID[e.id]
	delete(es.byID, e.id)
	es.mu.Unlock()
	e.mu.Lock()
	ended := e.ended
	e.ended = true
	if e.err == nil && !ended {
		e.err = errCancelled
	}
	e.mu.Unlock()
	e.signal()
	if live && !ended {
		hostEgressCancel(e.id)
	}
}

func (es *egresses) get(id uint64) *egress {
	es.mu.Lock()
	defer es.mu.Unlock()
	return es.byID[id]
}

func (es *egresses) response(id uint64, r abi.EgressResponse) {
	if e := es.get(id); e != nil {
		e.mu.Lock()
		if e.head == nil && !e.ended {
			e.head = &r
		}
		e.mu.Unlock()
		e.signal()
	}
}

func (es *egresses) chunk(id uint64, b []byte) {
	if e := es.get(id); e != nil {
		e.mu.Lock()
		if !e.ended {
			e.buf = append(e.buf, b...)
		}
		e.mu.Unlock()
		e.signal()
	}
}

// end ends egress id as the host says. A fenced end means a newer
// instance owns the tree: this one is a zombie, and the request fails with
// core.ErrFenced.
func (es *egresses) end(id uint64, end abi.EgressEnd) {
	es.mu.Lock()
	e := es.byID[id]
	delete(es.byID, id)
	es.mu.Unlock()
	if e == nil {
		return
	}
	var err error
	if end.Code != abi.EndOK {
		err = &endError{code: end.Code, msg: end.Message}
		if end.Code == abi.EndFenced && es.onFenced != nil {
			es.onFenced(id, end.Message)
		}
	}
	e.mu.Lock()
	if !e.ended {
		e.ended, e.err = true, err
	}
	e.mu.Unlock()
	e.signal()
}

// wait blocks until e changes or ctx ends.
func (e *egress) wait(ctx context.Context) error {
	select {
	case <-e.notify:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// doer is an httpmsg.Doer over egress: the model's client, and how a
// proxied tool's call reaches the host. The host sends the request (one
// round trip: it follows no redirect for the model).
type doer struct {
	es     *egresses
	kind   abi.EgressKind
	target string
}

var _ httpmsg.Doer = doer{}

func (d doer) Do(req *httpmsg.Request) (*httpmsg.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := d.es.start(abi.EgressRequest{Kind: d.kind, Target: d.target, Method: req.Method, URL: req.URL.String(), Header: req.Header, Body: body})
	stop := context.AfterFunc(ctx, func() { d.es.cancel(e) })
	for {
		e.mu.Lock()
		head, ended, endErr := e.head, e.ended, e.err
		e.mu.Unlock()
		if head != nil {
			header := head.Header
			if header == nil {
				header = httpmsg.Header{}
			}
			return &httpmsg.Response{StatusCode: head.Status, Header: header,
				Body: &egressBody{es: d.es, e: e, ctx: ctx, stop: stop}, Request: req}, nil
		}
		if ended {
			stop()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if endErr == nil {
				endErr = errors.New("egress ended without an answer")
			}
			return nil, endErr
		}
		if err := e.wait(ctx); err != nil {
			stop()
			d.es.cancel(e)
			return nil, err
		}
	}
}

// egressBody reads an egress answer's body as its chunks arrive.
type egressBody struct {
	es   *egresses
	e    *egress
	ctx  context.Context
	stop func() bool
	once sync.Once
}

func (b *egressBody) Read(p []byte) (int, error) {
	for {
		b.e.mu.Lock()
		if len(b.e.buf) > 0 {
			n := copy(p, b.e.buf)
			b.e.buf = b.e.buf[n:]
			b.e.mu.Unlock()
			return n, nil
		}
		ended, endErr := b.e.ended, b.e.err
		b.e.mu.Unlock()
		if ended {
			if b.ctx.Err() != nil {
				return 0, b.ctx.Err()
			}
			if endErr != nil {
				return 0, endErr
			}
			return 0, io.EOF
		}
		if err := b.e.wait(b.ctx); err != nil {
			return 0, err
		}
	}
}

func (b *egressBody) Close() error {
	b.once.Do(func() {
		b.stop()
		b.es.cancel(b.e)
	})
	return nil
}

// proxyTool is a tool whose HTTP side the host performs (abi.EgressTool):
// the guest knows its declaration, the host its URL, secret and policy.
type proxyTool struct {
	decl abi.ToolDecl
	// resources, if set, is the kind's own resource function (http_request:
	// httpargs.Resources); otherwise the tool's name is its resource.
	resources func(json.RawMessage) ([]string, error)
	es        *egresses
	// hostMinor is the host's ABI minor version: the call's rules go only
	// to a host of 1.5 or later, whose decoder takes them.
	hostMinor uint16
}

func (t *proxyTool) Spec() model.ToolSpec {
	schema := json.RawMessage(t.decl.Schema)
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	return model.ToolSpec{Name: t.decl.Name, Description: t.decl.Description, Schema: schema}
}

func (t *proxyTool) Idempotent() bool { return t.decl.Idempotent }

// Permission is the tool's configured default decision, as the host
// declared it (since ABI 1.4; empty, from an older host, asks).
func (t *proxyTool) Permission() string { return t.decl.Permission }

func (t *proxyTool) Resources(args json.RawMessage) ([]string, error) {
	if t.resources != nil {
		return t.resources(args)
	}
	return []string{"tool:" + t.decl.Name}, nil
}

func (t *proxyTool) Limits() tool.Limits {
	return tool.Limits{Timeout: t.decl.Timeout, OutputCap: t.decl.OutputCap}
}

// Execute asks the host to run the call. It sends the session's and the
// saved rules behind the call's Permit, so the host decides what the call
// reaches as it runs (an http_request redirect) by the same policy the
// guest's runner decided the call by.
func (t *proxyTool) Execute(ctx context.Context, call tool.Call) (string, error) {
	body := abi.ToolCall{ID: call.ID, Name: call.Name, Arguments: call.Arguments, IdempotencyKey: call.IdempotencyKey, SessionID: call.SessionID,
		SessionRules: call.SessionRules, SavedRules: call.SavedRules}.EncodeFor(t.hostMinor)
	req, err := httpmsg.NewRequest(ctx, httpmsg.MethodPost, "tool:"+t.decl.Name, strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	resp, err := doer{es: t.es, kind: abi.EgressTool, target: t.decl.Name}.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// newProxyTool builds the guest side of a declared tool, for a host of
// ABI minor version hostMinor.
func newProxyTool(d abi.ToolDecl, es *egresses, hostMinor uint16) (tool.Tool, error) {
	t := &proxyTool{decl: d, es: es, hostMinor: hostMinor}
	switch d.Kind {
	case abi.ToolWebhook:
	case abi.ToolHTTPRequest:
		// The host performs the request under its policy; the guest needs
		// only the resources.
		t.resources = httpargs.Resources
	default:
		return nil, fmt.Errorf("tool %s: unknown kind %q", d.Name, d.Kind)
	}
	return t, nil
}
