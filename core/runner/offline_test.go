package runner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// echoTool returns its arguments.
var echoTool = tool.Func{DefaultPermission: "allow", Name: "echo", IsIdempotent: true, Run: func(_ context.Context, c tool.Call) (string, error) {
	return string(c.Arguments), nil
}}

const threeStepPrompt = "/tool echo {\"a\":1}\n/tool echo {\"b\":2}\nhello there"

// The offline model drives a real 3-step turn: two tool calls, then text.
func TestOfflineModelThreeStepTurn(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(newRunner(t, offline.New(tr.Clock, offline.Options{}), runner.NewConfig(), echoTool))
	sid := n.NewSession("s")
	pid := n.Admit(sid, threeStepPrompt)
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	evs := tr.Events(sid)
	assert.Len(t, treetest.OfType(evs, event.StepCompleted), 3)
	done := treetest.OfType(evs, event.StepCompleted)
	var last event.StepDone
	require.NoError(t, done[2].Decode(&last))
	assert.Equal(t, "Tool echo returned: {\"a\":1}\nTool echo returned: {\"b\":2}\nYou said: hello there", last.Text)
}

// /fail is a permanent model failure: the turn fails with type model.
func TestOfflineModelFailDirective(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(newRunner(t, offline.New(tr.Clock, offline.Options{}), runner.NewConfig()))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "/fail the provider is down")
	n.Idle()
	assert.Equal(t, "failed", tr.PromptState(pid))
	fails := treetest.OfType(tr.Events(sid), event.ExecutionFailed)
	require.Len(t, fails, 1)
	var f event.Failed
	require.NoError(t, fails[0].Decode(&f))
	assert.Equal(t, event.FailModel, f.Type)
	assert.True(t, strings.Contains(f.Message, "the provider is down"), f.Message)
}

// BenchmarkTurnOffline runs a 3-step turn (two tool calls, then text) with
// the offline model at zero delay on a file-backed tree.
func BenchmarkTurnOffline(b *testing.B) {
	tr := treetest.New(b)
	n := tr.Boot(newRunner(b, offline.New(tr.Clock, offline.Options{}), runner.NewConfig(), echoTool))
	sid := n.NewSession("s")
	b.ResetTimer()
	for b.Loop() {
		n.Admit(sid, threeStepPrompt)
		n.Idle()
	}
	b.StopTimer()
	commits := float64(n.Kill.Commits()) / float64(b.N)
	b.ReportMetric(commits, "commits/turn")
}

// BenchmarkStream64KiB streams 64 KiB of text in 1 KiB chunks through one
// step, with the default checkpoints (1 s or 2 KiB) and with checkpoints
// pushed out of reach, so the per-KiB cost of checkpointing is the
// difference of the two ns/KiB figures.
func BenchmarkStream64KiB(b *testing.B) {
	const kib = 64
	chunk := strings.Repeat("w", 1024)
	script := func(int) scriptStep {
		var s scriptStep
		for range kib {
			s.chunks = append(s.chunks, chunkText(chunk))
		}
		s.chunks = append(s.chunks, chunkStop())
		return s
	}
	for _, bc := range []struct {
		name string
		cfg  runner.Config
	}{
		{"checkpoints=default", runner.NewConfig()},
		{"checkpoints=off", runner.NewConfig().WithCheckpoints(runner.DefaultStepWall, 1<<30)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr := treetest.New(b)
			n := tr.Boot(newRunner(b, &scriptModel{steps: script}, bc.cfg))
			sid := n.NewSession("s")
			b.ResetTimer()
			for b.Loop() {
				n.Admit(sid, "stream")
				n.Idle()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*kib), "ns/KiB")
		})
	}
}
