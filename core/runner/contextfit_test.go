package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// exchangeModel answers a prompt that starts "call N|" by calling the
// tool big for N bytes of output, then "ok"; any other prompt with "ok". It
// keeps every request it receives.
type exchangeModel struct {
	mu   sync.Mutex
	reqs []model.Request
}

func (m *exchangeModel) Name() string { return "exchange" }

func (m *exchangeModel) Stream(_ context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	var n int
	last := req.Messages[len(req.Messages)-1]
	if _, err := fmt.Sscanf(last.Text, "call %d|", &n); err == nil && last.Role == model.RoleUser {
		return &scriptStream{s: scriptStep{chunks: toolCall("big", fmt.Sprintf(`{"bytes":%d}`, n))}}, nil
	}
	return &scriptStream{s: scriptStep{chunks: text("ok")}}, nil
}

func (m *exchangeModel) last() model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[len(m.reqs)-1]
}

// bigTool returns as many bytes as its call asks for.
var bigTool = tool.Func{DefaultPermission: "allow", Name: "big", IsIdempotent: true, Limit: tool.Limits{OutputCap: 1 << 20},
	Run: func(_ context.Context, c tool.Call) (string, error) {
		var args struct{ Bytes int }
		if err := json.Unmarshal(c.Arguments, &args); err != nil {
			return "", err
		}
		return strings.Repeat("z", args.Bytes), nil
	}}

// prompt is a prompt of size bytes; with output > 0 the model answers it
// by calling big for that many bytes.
func prompt(i, size, output int) string {
	p := fmt.Sprintf("prompt %d ", i)
	if output > 0 {
		p = fmt.Sprintf("call %d|prompt %d ", output, i)
	}
	return p + strings.Repeat("p", size-len(p))
}

// exchangeRun is one session of a runner of cfg (with bigTool).
type exchangeRun struct {
	t     *testing.T
	node  *treetest.Node
	model *exchangeModel
}

func newExchangeRun(t *testing.T, tr *treetest.Tree, cfg runner.Config) *exchangeRun {
	m := &exchangeModel{}
	n := tr.Boot(newRunner(t, m, cfg, bigTool))
	n.NewSession("s")
	return &exchangeRun{t: t, node: n, model: m}
}

// run admits each prompt as its own turn, in order, and returns the last
// request the model received.
func (r *exchangeRun) run(prompts ...string) model.Request {
	for _, p := range prompts {
		r.node.Admit("s", p)
		r.node.Idle()
	}
	return r.model.last()
}

// lastRequest is the last request of prompts run on a fresh tree.
func lastRequest(t *testing.T, budget int, prompts ...string) model.Request {
	return newExchangeRun(t, treetest.New(t), runner.NewConfig().WithContextBytes(budget)).run(prompts...)
}

// omittedCount is how many messages a request's first message says were
// left out, or -1 when it does not start with that notice.
func omittedCount(req model.Request) int {
	var n int
	first := req.Messages[0]
	if _, err := fmt.Sscanf(first.Text, runner.OmittedNotice, &n); err != nil || first.Role != model.RoleUser || !first.Notice {
		return -1
	}
	return n
}

// requireCallsPaired checks what providers require of a request: each
// assistant message's tool calls are answered by the tool messages right
// after it, in order, and no tool message answers anything else.
func requireCallsPaired(t *testing.T, req model.Request) {
	t.Helper()
	var open []model.ToolCall
	for i, m := range req.Messages {
		if m.Role == model.RoleTool {
			require.NotEmpty(t, open, "message %d: a tool result without its call", i)
			require.Equal(t, open[0].ID, m.ToolCallID, "message %d answers another call", i)
			open = open[1:]
			continue
		}
		require.Empty(t, open, "message %d: a tool call without its result", i)
		open = m.ToolCalls
	}
	require.Empty(t, open, "the request ends in a tool call without its result")
}

// A session whose history is past the context size, even with every tool
// output elided, leaves out its oldest exchanges, whole: the request fits,
// says first how many messages it left out, and keeps the newest exchanges
// and the current prompt as they are.
func TestOldestExchangesLeftOutToFitTheContext(t *testing.T) {
	const budget, output = 20_000, 1000
	var prompts []string
	for i := range 10 {
		prompts = append(prompts, prompt(i, 3000, output))
	}
	whole := lastRequest(t, 1<<30, prompts...)
	fitted := lastRequest(t, budget, prompts...)

	assert.LessOrEqual(t, requestTextBytes(fitted), budget)
	requireCallsPaired(t, fitted)
	left := omittedCount(fitted)
	require.Positive(t, left, "the request starts with the notice")
	kept := fitted.Messages[1:]
	require.Equal(t, len(whole.Messages), left+len(kept), "the notice counts every message left out")
	assert.Equal(t, model.RoleUser, kept[0].Role, "the request goes on at an exchange's prompt")
	assert.Equal(t, prompts[len(prompts)-1], kept[len(kept)-3].Text, "the current prompt is sent whole")
	for i, m := range kept {
		w := whole.Messages[left+i]
		if m.Role == model.RoleTool && m.Text != w.Text {
			assert.Equal(t, fmt.Sprintf(runner.ElidedMarker, len(w.Text)), m.Text, "kept message %d: an output is whole or elided", i)
			m.Text = w.Text
		}
		assert.Equal(t, w, m, "kept message %d is the transcript's", i)
	}
	marker := fmt.Sprintf(runner.ElidedMarker, output)
	outputs := toolTexts(fitted)
	elided := 0
	for elided < len(outputs) && outputs[elided] == marker {
		elided++
	}
	require.Positive(t, elided, "the kept exchanges' outputs are elided as needed")
	for _, o := range outputs[elided:] {
		assert.Len(t, o, output, "the newest outputs are whole")
	}
	assert.Greater(t, requestTextBytes(fitted)-len(marker)+output, budget, "no more outputs are elided than needed")
	back := left - 1
	for whole.Messages[back].Role != model.RoleUser {
		back--
	}
	assert.Greater(t, leastBytes(model.Request{System: whole.System, Tools: whole.Tools, Messages: whole.Messages[back:]})+len(fitted.Messages[0].Text), budget,
		"no more is left out than needed: with the newest exchange left out, even its outputs elided, it would not fit")
}

// Eliding tool outputs comes first: while that is enough, no exchange is
// left out.
func TestToolOutputsElidedBeforeAnyExchangeIsLeftOut(t *testing.T) {
	prompts := []string{prompt(0, 1000, 5000), prompt(1, 1000, 5000), prompt(2, 1000, 5000)}
	req := lastRequest(t, 9000, prompts...)

	assert.LessOrEqual(t, requestTextBytes(req), 9000)
	assert.Equal(t, -1, omittedCount(req), "nothing is left out")
	assert.Equal(t, prompts[0], req.Messages[0].Text, "the first prompt is still sent")
	assert.Equal(t, []string{fmt.Sprintf(runner.ElidedMarker, 5000), fmt.Sprintf(runner.ElidedMarker, 5000), strings.Repeat("z", 5000)}, toolTexts(req))
}

// A current prompt larger than the context size is sent whole, after the
// notice that everything before it was left out: the provider decides.
func TestCurrentPromptPastTheContextSizeIsSentWhole(t *testing.T) {
	prompts := []string{prompt(0, 500, 500), prompt(1, 500, 0), prompt(2, 5000, 0)}
	req := lastRequest(t, 1000, prompts...)

	require.Len(t, req.Messages, 2)
	assert.Equal(t, 6, omittedCount(req), "two exchanges of 4 and 2 messages are left out")
	assert.Equal(t, prompts[2], req.Messages[1].Text)
}

// A result settled after a continuation notice (its turn was resumed
// while the call ran) is sent with its call, before the notice; leaving
// out that exchange leaves out the result too, though it is stored after
// the notice that opens the next exchange, which is kept.
func TestExchangeLeftOutWithItsResultStoredAfterANotice(t *testing.T) {
	const budget = 7000
	tr := treetest.New(t)
	running := make(chan struct{})
	stuck := tool.Func{DefaultPermission: "allow", Name: "big", IsIdempotent: true, Run: func(ctx context.Context, _ tool.Call) (string, error) {
		close(running)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	m := &exchangeModel{}
	n := tr.Boot(newRunner(t, m, runner.NewConfig().WithContextBytes(budget), stuck))
	n.NewSession("s")
	n.Admit("s", prompt(0, 3000, 1000))
	<-running
	n.Crash()
	r := &exchangeRun{t: t, node: tr.Boot(newRunner(t, m, runner.NewConfig().WithContextBytes(budget), bigTool)), model: m}
	r.node.Idle()
	resumed := r.model.last().Messages
	require.Equal(t, event.ContinuationNotice, resumed[len(resumed)-1].Text, "the call ran again after the notice")

	req := r.run(prompt(1, 3000, 0), prompt(2, 3000, 0))
	requireCallsPaired(t, req)
	assert.LessOrEqual(t, requestTextBytes(req), budget)
	assert.Equal(t, 3, omittedCount(req), "the first prompt, its call and its result are left out")
	assert.Equal(t, event.ContinuationNotice, req.Messages[1].Text, "the request goes on at the notice")
	assert.Equal(t, prompt(2, 3000, 0), req.Messages[len(req.Messages)-1].Text)
}

// The transcript is read by its sizes first: the text of the messages left
// out is never read, so what a step reads is bounded by the context size,
// not by the session's history.
func TestMessagesLeftOutAreNotRead(t *testing.T) {
	const budget = 20_000
	tr := treetest.New(t)
	var reads transcriptReads
	tr.WrapDB = func(db storage.DB) storage.DB { return countingDB{db, &reads} }
	r := newExchangeRun(t, tr, runner.NewConfig().WithContextBytes(budget))
	for i := range 20 {
		r.run(prompt(i, 50_000, 0))
	}
	reads.reset()
	req := r.run(prompt(20, 1000, 0))

	assert.Equal(t, 40, omittedCount(req), "every earlier exchange is left out")
	assert.Less(t, reads.most(), 2000, "the last turn reads its own prompt and the transcript's sizes, not the 1 MB before them")
}

// leastBytes is the size of req (requestTextBytes) with every tool output
// elided that is longer than its marker, but for those that say the call
// did not run or was stopped (keptWhole), which are never elided.
func leastBytes(req model.Request) int {
	n := fixedBytes(req)
	for _, m := range req.Messages {
		size := requestTextBytes(model.Request{Messages: []model.Message{m}})
		if marker := len(fmt.Sprintf(runner.ElidedMarker, size)); m.Role == model.RoleTool && !keptWhole(m.Text) && marker < size {
			size = marker
		}
		n += size
	}
	return n
}

// keptWhole tells the tool results the runner never elides by their
// text: NoResult, NotRun, and what a permission request that stopped the
// call says (declined by the person, with their message, or cancelled).
func keptWhole(text string) bool {
	switch {
	case text == runner.NoResult, text == runner.NotRun, text == core.PermissionCancelledOutput:
		return true
	}
	return strings.HasPrefix(text, core.DeclinedByUser)
}

// transcriptReads is the most bytes of text one transaction read from
// the messages table.
type transcriptReads struct {
	mu  sync.Mutex
	max int
}

type countingDB struct {
	storage.DB
	reads *transcriptReads
}

func (r *transcriptReads) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.max = 0
}

func (r *transcriptReads) most() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.max
}

// countingDB counts, in each transaction, the bytes of text its queries
// of the messages table return.
func (d countingDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	return d.DB.Tx(ctx, func(tx storage.Tx) error {
		c := &countingTx{Tx: tx}
		err := fn(c)
		d.reads.mu.Lock()
		d.reads.max = max(d.reads.max, c.bytes)
		d.reads.mu.Unlock()
		return err
	})
}

type countingTx struct {
	storage.Tx
	bytes int
}

func (tx *countingTx) Query(query string, args ...any) (*storage.Rows, error) {
	rows, err := tx.Tx.Query(query, args...)
	if err != nil || !strings.Contains(query, "FROM messages") {
		return rows, err
	}
	for _, row := range rows.Values {
		for _, v := range row {
			if s, ok := v.(string); ok {
				tx.bytes += len(s)
			}
		}
	}
	return rows, err
}

// A request that fits once one exchange is left out, with the notice that
// says so as long as it is, leaves out that one only: the room kept for
// the notice is its own size, not the longest count it could hold, which
// cost a second exchange whenever the request came within 18 bytes of the
// context size.
func TestOneExchangeLeftOutWhenTheNoticeFitsExactly(t *testing.T) {
	prompts := []string{prompt(0, 1000, 0), prompt(1, 1000, 0), prompt(2, 1000, 0)}
	// The last request: the notice of the first exchange's two messages,
	// the second exchange (its prompt and "ok"), and the current prompt.
	budget := fixedBytes(lastRequest(t, 1<<30, prompts...)) + len(fmt.Sprintf(runner.OmittedNotice, 2)) + 1000 + len("ok") + 1000
	req := lastRequest(t, budget, prompts...)

	assert.Equal(t, 2, omittedCount(req), "only the first exchange is left out")
	assert.Equal(t, budget, requestTextBytes(req), "the request fills the context size exactly")
}

// A call its turn left without a result (interrupted while a sibling ran)
// is sent a made-up one, NoResult or NotRun, that says what happened to
// the call. It is never elided: its marker would read as an output the
// call gave, and it is short. It counts at its size: a request that fits
// exactly with both whole exchanges leaves nothing out (counted as the
// longest marker, each such call once cost 17 bytes more than it is sent),
// and one a byte smaller leaves out the exchange of those calls whole.
func TestUnsettledCallsKeptWholeAndCountedAtTheirSize(t *testing.T) {
	whole := requestAfterUnsettledCalls(t, 1<<30)
	require.Equal(t, -1, omittedCount(whole))
	assert.Contains(t, toolTexts(whole), runner.NotRun, "a call of the first turn never ran")
	assert.Contains(t, toolTexts(whole), runner.NoResult, "a call of the first turn has no result")
	budget := leastBytes(whole)

	req := requestAfterUnsettledCalls(t, budget)
	assert.Equal(t, -1, omittedCount(req), "nothing needs to be left out")
	assert.Equal(t, budget, requestTextBytes(req))
	assert.Equal(t, toolTexts(whole), toolTexts(req))

	req = requestAfterUnsettledCalls(t, budget-1)
	assert.Equal(t, 4, omittedCount(req), "the first exchange (its prompt, its calls and their two results) is left out")
	assert.Empty(t, toolTexts(req), "no made-up result is elided")
	assert.LessOrEqual(t, requestTextBytes(req), budget-1)
}

// requestAfterUnsettledCalls is the last request, with a context size of
// budget, of a chargeAndNote session and two turns of 1000 byte prompts
// after it.
func requestAfterUnsettledCalls(t *testing.T, budget int) model.Request {
	c := interruptChargeAndNote(t, runner.NewConfig().WithContextBytes(budget))
	return c.run(prompt(0, 1000, 0), prompt(1, 1000, 0))
}

// Each elided output is counted at its marker's size, as the size query
// computes it from the output's length: a request that fits exactly with
// every output elided leaves nothing out, and one byte less leaves out
// the oldest exchange, never sends more than the context size.
func TestElidedOutputsCountedAtTheirMarkersSize(t *testing.T) {
	prompts := []string{prompt(0, 100, 5), prompt(1, 100, 50), prompt(2, 100, 5000), prompt(3, 100, 0)}
	whole := lastRequest(t, 1<<30, prompts...)
	budget := leastBytes(whole)

	req := lastRequest(t, budget, prompts...)
	assert.Equal(t, -1, omittedCount(req), "nothing is left out")
	assert.Equal(t, budget, requestTextBytes(req))

	req = lastRequest(t, budget-1, prompts...)
	assert.Equal(t, 4, omittedCount(req), "the first exchange is left out")
	assert.LessOrEqual(t, requestTextBytes(req), budget-1)
}

// The context size bounds the whole request: the system prompt and the
// tool specs, sent with every request, count first, and the messages fit
// in what they leave. Once, only the messages counted, and a request with
// a long system prompt went past the size by all of it.
func TestSystemPromptAndToolSpecsCountInTheContextSize(t *testing.T) {
	prompts := []string{prompt(0, 1000, 0), prompt(1, 1000, 0), prompt(2, 1000, 0)}
	lastRequest := func(budget int) model.Request {
		cfg := runner.NewConfig().WithContextBytes(budget).WithSystemPrompt(strings.Repeat("s", 1500))
		return newExchangeRun(t, treetest.New(t), cfg).run(prompts...)
	}
	whole := lastRequest(1 << 30)
	require.NotEmpty(t, whole.Tools)
	budget := requestTextBytes(whole)

	req := lastRequest(budget)
	assert.Equal(t, -1, omittedCount(req), "a request exactly at the context size leaves nothing out")
	assert.Equal(t, budget, requestTextBytes(req))

	req = lastRequest(budget - 1)
	assert.Equal(t, 2, omittedCount(req), "one byte less, the first exchange is left out")
	assert.LessOrEqual(t, requestTextBytes(req), budget-1)
}
