package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

func openaiConfig() runtime.BootConfig {
	return runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: "http://model.test/v1", Name: "test-model"}}
}

// A turn waits on a model stream the host holds open; meanwhile the same
// guest answers a snapshot, and an interrupt stops the turn, cancels the
// egress and commits interrupted{user} before its answer.
func TestInterruptWhileModelStreams(t *testing.T) {
	e := newEnv(t, 2, openaiConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	var started []uint64
	e.s.onEgress = func(id uint64, req runtime.EgressRequest) {
		started = append(started, id)
		require.Equal(t, abi.EgressModel, req.Kind)
		require.Equal(t, "http://model.test/v1/chat/completions", req.URL)
		require.Empty(t, req.Header.Get("Authorization"), "the key stays with the host")
	}
	e.createAndPrompt("tell me a story")
	require.Len(t, started, 1, "the turn asked the model")
	id := started[0]

	// The stream opens and sends a little, then stalls.
	ctx := context.Background()
	require.NoError(t, e.g.EgressResponse(ctx, id, 200, http.Header{"Content-Type": {"text/event-stream"}}))
	require.NoError(t, e.g.EgressChunk(ctx, id, []byte("data: {\"choices\":[{\"delta\":{\"content\":\"Once upon\"}}]}\n\n")))
	require.NotEmpty(t, e.s.emitted("session.text.delta@1"))

	snap := e.snapshot()
	require.Equal(t, "busy", snap.Status)
	require.Empty(t, e.s.cancelled, "the stream is still open while the snapshot is served")

	r := e.do("POST", "/v1/sessions/"+treeID+"/interrupt", nil)
	require.Equal(t, 200, r.status, r.body.String())
	require.True(t, r.ended)
	require.Equal(t, map[string]bool{"interrupted": true}, decode[map[string]bool](t, r))
	require.Equal(t, []uint64{id}, e.s.cancelled, "the egress was cancelled")

	ints := e.s.emitted("session.execution.interrupted@1")
	require.Len(t, ints, 1)
	var payload struct{ Reason string }
	require.NoError(t, json.Unmarshal(ints[0].Data, &payload))
	require.Equal(t, "user", payload.Reason)
	// The durable interrupt was emitted before the response ended.
	snap = e.snapshot()
	require.Equal(t, "idle", snap.Status)
	require.Nil(t, snap.Claim)

	// A late chunk for the cancelled egress is ignored.
	require.NoError(t, e.g.EgressChunk(ctx, id, []byte("data: late\n\n")))
}

// promptedModelCall boots a guest on the OpenAI provider, prompts it, and
// returns the one egress request the turn's model call started.
func promptedModelCall(t *testing.T) (*env, uint64) {
	t.Helper()
	e := newEnv(t, 3, openaiConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	var started []uint64
	e.s.onEgress = func(id uint64, req runtime.EgressRequest) { started = append(started, id) }
	e.createAndPrompt("hi")
	require.Len(t, started, 1)
	return e, started[0]
}

// The model's answer streams in over egress and the turn succeeds.
func TestModelOverEgress(t *testing.T) {
	e, id := promptedModelCall(t)
	e.answer(id,
		`data: {"choices":[{"delta":{"content":"Hello"}}]}`,
		`data: {"choices":[{"delta":{"content":" there"},"finish_reason":"stop"}]}`,
		`data: [DONE]`)
	snap := e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, "Hello there", snap.Messages[len(snap.Messages)-1].Text)
	require.Len(t, e.s.emitted("session.execution.succeeded@1"), 1)
}

// A host that announces ABI 1.2 delivers egress ends as the message alone
// (the guest decodes them in the layout of the version both speak): the
// guest reads the host's message, not the code's bytes in front of it.
func TestEgressEndToAnOlderHostsGuestIsItsMessage(t *testing.T) {
	e := newEnv(t, 11, openaiConfig())
	logs := &bytes.Buffer{}
	require.NoError(t, e.boot(runtime.Options{HostVersion: abi.PackVersion(1, abi.MinorEgressEndCode-1),
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))}))
	e.createAndPrompt("hi")
	require.Len(t, e.s.egress, 1)
	for id := range e.s.egress {
		require.NoError(t, e.g.EgressEnd(context.Background(), id, runtime.EgressEnd{Code: abi.EndNetwork, Message: "connection refused"}))
	}
	require.Len(t, e.s.emitted("session.step.cut@1"), 1, "the end failed the request")
	// The guest quotes a value with a space (its line is then the host's
	// quoted msg): cause="connection refused", escaped once more.
	require.Contains(t, logs.String(), `cause=\"connection refused\"`, "the guest's view of the host's message")
}

// An egress body may arrive in chunks of any size, down to one byte (a
// provider's stream cut anywhere by the network): each chunk's bytes
// reach the guest as they are.
func TestEgressBodyArrivesOneByteAtATime(t *testing.T) {
	e, id := promptedModelCall(t)
	ctx := context.Background()
	require.NoError(t, e.g.EgressResponse(ctx, id, 200, http.Header{"Content-Type": {"text/event-stream"}}))
	body := "data: {\"choices\":[{\"delta\":{\"content\":\"Byte\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\" by byte\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	for i := range len(body) {
		require.NoError(t, e.g.EgressChunk(ctx, id, []byte{body[i]}))
	}
	require.NoError(t, e.g.EgressEnd(ctx, id, runtime.EgressEnd{}))
	snap := e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, "Byte by byte", snap.Messages[len(snap.Messages)-1].Text)
}

// A system prompt in the boot configuration is the runner's: the model
// request of a session without its own starts with it.
func TestBootSystemPromptReachesTheModel(t *testing.T) {
	cfg := openaiConfig()
	cfg.SystemPrompt = "You are the operator's assistant."
	e := newEnv(t, 3, cfg)
	require.NoError(t, e.boot(runtime.Options{}))
	var reqs []runtime.EgressRequest
	e.s.onEgress = func(id uint64, req runtime.EgressRequest) { reqs = append(reqs, req) }
	e.createAndPrompt("hi")
	require.Len(t, reqs, 1)
	var body struct {
		Messages []struct{ Role, Content string }
	}
	require.NoError(t, json.Unmarshal(reqs[0].Body, &body), string(reqs[0].Body))
	require.NotEmpty(t, body.Messages)
	require.Equal(t, "system", body.Messages[0].Role)
	require.Equal(t, cfg.SystemPrompt, body.Messages[0].Content)
}

// webhookSettled has the model call a webhook tool, lets answer play the
// host's side of the tool's egress, and returns how the call settled.
func webhookSettled(t *testing.T, answer func(e *env, id uint64)) (outcome, output string) {
	t.Helper()
	e, ids := hookCalled(t, 7, "allow")
	require.Len(t, ids, 2, "the tool call went to the host")
	answer(e, ids[1])
	settled := e.s.emitted("session.tool.settled@1")
	require.Len(t, settled, 1)
	var d struct{ Outcome, Output string }
	require.NoError(t, json.Unmarshal(settled[0].Data, &d))
	return d.Outcome, d.Output
}

// hookCalled boots a guest whose model, on its first prompt, calls webhook
// tool "hook" (its permission perm), and returns it with the ids of the
// egress it made by then: the model's request, then the tool's if it went.
func hookCalled(t *testing.T, seed uint64, perm string) (*env, []uint64) {
	t.Helper()
	cfg := openaiConfig()
	cfg.Tools = []abi.ToolDecl{{Kind: abi.ToolWebhook, Name: "hook", Permission: perm}}
	e := newEnv(t, seed, cfg)
	require.NoError(t, e.boot(runtime.Options{}))
	var ids []uint64
	e.s.onEgress = func(id uint64, req runtime.EgressRequest) { ids = append(ids, id) }
	e.createAndPrompt("call it")
	require.Len(t, ids, 1)
	e.answerToolCall(ids[0], "hook", "{}")
	return e, ids
}

// A tool's answer may arrive as one chunk larger than any one read of its
// body (and within the output cap): every byte reaches the tool's output.
func TestToolAnswerLargerThanAReadArrivesWhole(t *testing.T) {
	want := strings.Repeat("0123456789", 400)
	outcome, output := webhookSettled(t, func(e *env, id uint64) {
		ctx := context.Background()
		require.NoError(t, e.g.EgressResponse(ctx, id, 200, http.Header{"Content-Type": {"text/plain"}}))
		require.NoError(t, e.g.EgressChunk(ctx, id, []byte(want)))
		require.NoError(t, e.g.EgressEnd(ctx, id, runtime.EgressEnd{}))
	})
	require.Equal(t, "ok", outcome)
	require.Len(t, output, len(want))
	require.Equal(t, want, output)
}

// A tool answer the host ends with a failure after part of its body (the
// connection reset) fails the call with the host's message: the part is
// not taken for the whole answer.
func TestToolAnswerCutByTheHostFailsTheCall(t *testing.T) {
	outcome, output := webhookSettled(t, func(e *env, id uint64) {
		ctx := context.Background()
		require.NoError(t, e.g.EgressResponse(ctx, id, 200, http.Header{"Content-Type": {"text/plain"}}))
		require.NoError(t, e.g.EgressChunk(ctx, id, []byte("partial")))
		require.NoError(t, e.g.EgressEnd(ctx, id, runtime.EgressEnd{Code: abi.EndNetwork, Message: "connection reset"}))
	})
	require.Equal(t, "error", outcome)
	require.Equal(t, "connection reset", output)
}

// A host that ends a tool's egress cleanly without ever answering its
// head fails the call; the guest does not take the end for an answer.
func TestToolEgressEndedWithoutAnAnswerFailsTheCall(t *testing.T) {
	outcome, output := webhookSettled(t, func(e *env, id uint64) {
		require.NoError(t, e.g.EgressEnd(context.Background(), id, runtime.EgressEnd{}))
	})
	require.Equal(t, "error", outcome)
	require.Equal(t, "egress ended without an answer", output)
}
