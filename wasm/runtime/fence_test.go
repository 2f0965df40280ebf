package runtime_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// zombie boots guest A, then, in the window between A's last write before
// its model request (step.started) and the request itself, boots guest B
// on its own connection over the same database file, as a second process
// would after taking the tree over. A is then a zombie: core let its write
// through (it committed before B's epoch), so only the host's epoch check
// on egress stands between it and the model. It returns both envs, A's
// import sites from its egress_start on, and A's log.
func zombie(t *testing.T, seed uint64, hostVersion uint32) (a, b *env, after []runtime.Site, logs *bytes.Buffer) {
	t.Helper()
	a = newEnv(t, seed, openaiConfig())
	logs = &bytes.Buffer{}
	recording := false
	require.NoError(t, a.boot(runtime.Options{
		HostVersion: hostVersion,
		Log:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: dropTime})),
		Interpose: func(s runtime.Site) error {
			if s.Import == abi.ImportEgressStart && !s.After {
				recording = true
			}
			if recording {
				after = append(after, s)
			}
			return nil
		},
	}))
	b = a.sibling(seed + 100)
	var bootErr error
	a.s.onEmit = func(ev runtime.Emitted) {
		if ev.Type == "session.step.started@1" && b.g == nil {
			bootErr = b.boot(runtime.Options{})
		}
	}
	a.createAndPrompt("hi")
	require.NoError(t, bootErr)
	require.NotNil(t, b.g, "B booted while A's turn ran")
	return a, b, after, logs
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// A superseded guest gets no outbound request performed: the runtime reads
// the tree's epoch before Services.StartEgress, refuses A's request, and
// delivers A an end saying so within the same call; A's turn stops there.
// B, the live guest, resumes the turn and its egress goes out as usual.
func TestZombieEgressIsFenced(t *testing.T) {
	a, b, after, logs := zombie(t, 4, 0)

	require.Empty(t, a.s.egress, "the zombie's model request reached its host")
	require.NotContains(t, a.s.log.String(), "egress_start", "StartEgress was never called for A")
	require.Contains(t, logs.String(), `code=fenced reason="fenced: a newer instance owns this tree (its epoch 2, this instance's 1)"`)
	// The end carried code fenced (ABI 1.3), and the guest took it as
	// fencing, by its code: its request failed with core.ErrFenced and it
	// said it is superseded.
	require.Equal(t, 1, strings.Count(logs.String(), "egress fenced: this instance is superseded"), logs.String())

	// A took the end and stopped at once: a fenced request is no provider
	// failure to record, and any write would only meet the write fence.
	// Nothing of it waits on the egress any more.
	require.Equal(t, runtime.Site{Import: abi.ImportEgressStart, Phase: runtime.PhaseServe}, after[0])
	require.Equal(t, runtime.Site{Import: abi.ImportEgressStart, After: true, Phase: runtime.PhaseServe}, after[1])
	var imports []string
	for _, s := range after[2:] {
		if !s.After {
			imports = append(imports, s.Import)
		}
	}
	require.NotContains(t, imports, abi.ImportSQLBegin, "no doomed write after the fenced end")
	require.NotContains(t, imports, abi.ImportEgressStart)
	idle, err := a.g.Idle(context.Background())
	require.NoError(t, err)
	require.True(t, idle, "A's execution ended on the fenced egress")
	require.Empty(t, a.s.timers, "no retry is scheduled either")
	require.False(t, a.conn.InTx())

	// B resumed the turn; its model request carries B's epoch and goes out.
	require.Len(t, b.s.egress, 1)
	var id uint64
	for k, req := range b.s.egress {
		id = k
		require.True(t, req.HasEpoch)
		require.Equal(t, int64(2), req.Epoch)
	}
	b.answer(id,
		`data: {"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop"}]}`,
		`data: [DONE]`)
	snap := b.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, "Hi", snap.Messages[len(snap.Messages)-1].Text)
	require.Len(t, b.s.emitted("session.execution.succeeded@1"), 1)
	require.Empty(t, a.s.emitted("session.execution.succeeded@1"))
	require.Empty(t, a.s.egress, "A asked for nothing more")
}

// A live guest's egress carries the epoch it holds and is not refused.
func TestLiveEgressCarriesItsEpoch(t *testing.T) {
	e := newEnv(t, 5, openaiConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("hi")
	require.Len(t, e.s.egress, 1)
	for _, req := range e.s.egress {
		require.True(t, req.HasEpoch)
		require.Equal(t, int64(1), req.Epoch, "the first boot's epoch")
	}
}

// A host that announces ABI 1.1 gets no epoch (its decoder would refuse
// the field), so it cannot check: the request goes out as before 1.2.
func TestNoEpochForAnOlderHost(t *testing.T) {
	a, _, _, _ := zombie(t, 6, abi.PackVersion(1, 1))
	require.Len(t, a.s.egress, 1, "unchecked: the zombie's request went out")
	for _, req := range a.s.egress {
		require.False(t, req.HasEpoch)
	}
}

// The guest tells a fenced end from any other by its code, never by its
// text: a fenced end whose message says nothing of fencing takes the
// fencing path, and a network end whose text starts "fenced:" does not. A
// network failure of the model is cut and retried; a fenced one stops the
// turn's execution at once, writing nothing (the next instance resumes it).
func TestGuestTellsFencedEndsByCode(t *testing.T) {
	for _, tc := range []struct {
		end    runtime.EgressEnd
		fenced bool
	}{
		{runtime.EgressEnd{Code: abi.EndNetwork, Message: "fenced: but only in words"}, false},
		{runtime.EgressEnd{Code: abi.EndError, Message: "fenced: by an older host"}, false},
		{runtime.EgressEnd{Code: abi.EndFenced, Message: "the host says no"}, true},
	} {
		t.Run(tc.end.Code.String(), func(t *testing.T) {
			e := newEnv(t, 11, openaiConfig())
			logs := &bytes.Buffer{}
			require.NoError(t, e.boot(runtime.Options{Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))}))
			e.createAndPrompt("hi")
			require.Len(t, e.s.egress, 1)
			for id := range e.s.egress {
				require.NoError(t, e.g.EgressEnd(context.Background(), id, tc.end))
			}
			require.Equal(t, tc.fenced, strings.Contains(logs.String(), "egress fenced: this instance is superseded"), logs.String())
			cuts := e.s.emitted("session.step.cut@1")
			if tc.fenced {
				require.Empty(t, cuts, "a fenced instance records nothing")
				require.Empty(t, e.s.emitted("session.retry.scheduled@1"))
				return
			}
			// Any other end is the request's failure, recorded and
			// retried; the host's message (a transport's text names the
			// provider's address) goes to the log, not to the events.
			require.Len(t, cuts, 1)
			require.Contains(t, string(cuts[0].Data), "the provider could not be reached")
			require.NotContains(t, string(cuts[0].Data), tc.end.Message)
			require.Contains(t, logs.String(), tc.end.Message)
			require.Len(t, e.s.emitted("session.retry.scheduled@1"), 1)
		})
	}
}

// A host that announces 1.2 sends ends as bare text, so the guest cannot
// tell a fenced one and treats it as any failure; the runtime still
// refuses the zombie's request.
func TestFencedEndToAnOlderHostsGuestIsText(t *testing.T) {
	a, _, _, logs := zombie(t, 12, abi.PackVersion(1, 2))
	require.Empty(t, a.s.egress, "the zombie's model request reached its host")
	require.Contains(t, logs.String(), "code=fenced")
	require.NotContains(t, logs.String(), "egress fenced: this instance is superseded")
}

// The fence is deterministic: the same inputs give the same imports, the
// refused request's end included, for both guests.
func TestZombieFenceIsDeterministic(t *testing.T) {
	run := func(seed uint64) string {
		a, b, _, logs := zombie(t, seed, 0)
		return a.s.log.String() + "\n--\n" + b.s.log.String() + "\n--\n" + logs.String()
	}
	x, y := run(9), run(9)
	require.Equal(t, x, y)
	require.Contains(t, x, "fenced: a newer instance owns this tree")
}

// An egress that a booting guest's sweep starts (it resumes a turn) and
// the fence refuses, because another host took the tree over meanwhile,
// has its end delivered within the Boot call, in the layout both sides
// speak: the boot succeeds and the guest knows itself superseded. (The
// end once went out in ABI 1.0's layout, which a 1.3+ guest refused as
// malformed, failing the boot.)
func TestEgressFencedDuringBootGetsItsEnd(t *testing.T) {
	a := newEnv(t, 6, openaiConfig())
	require.NoError(t, a.boot(runtime.Options{}))
	a.createAndPrompt("hi") // its model request is out, never answered: A dies here

	logs := &bytes.Buffer{}
	c := a.sibling(7)
	d := a.sibling(8)
	var dBoot error
	err := c.boot(runtime.Options{
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: dropTime})),
		Interpose: func(s runtime.Site) error {
			// C's first call is its Boot: the resumed turn's request starts
			// within it (after the sweep, in phase serve).
			if s.Import == abi.ImportEgressStart && !s.After && d.g == nil {
				dBoot = d.boot(runtime.Options{}) // D takes the tree over inside C's boot
			}
			return nil
		},
	})
	require.NotNil(t, d.g, "C's boot resumed the turn and started its egress")
	require.NoError(t, dBoot)
	require.NoError(t, err, logs.String())
	require.Empty(t, c.s.egress, "the superseded guest's request never went out")
	require.Contains(t, logs.String(), "egress fenced: this instance is superseded", logs.String())
}
