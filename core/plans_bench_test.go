package core_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// seedTranscript writes n messages of 2 KB each straight into the
// session's transcript (user, assistant, tool in turn), as a session
// that has run for a long time holds them.
func seedTranscript(b *testing.B, tr *treetest.Tree, sessionID string, n int) {
	b.Helper()
	text := strings.Repeat("x", 2<<10)
	roles := []string{"user", "assistant", "tool"}
	tr.Read(func(tx storage.Tx) error {
		for i := range n {
			if _, err := tx.Exec(`INSERT INTO messages (id, session_id, seq, prompt_id, role, text, created_at) VALUES (?, ?, ?, ?, ?, ?, 0)`,
				fmt.Sprintf("msg-%d", i), sessionID, 1_000_000+i, fmt.Sprintf("prompt-%d", i/3), roles[i%3], text); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkSnapshotOfALongTranscript is a snapshot (its newest page of
// messages) of a session with 20,000 messages of 2 KB: the page's sizes
// are read from the newest messages down, not from every message the
// session has had.
func BenchmarkSnapshotOfALongTranscript(b *testing.B) {
	tr := treetest.New(b)
	n := tr.Boot(treetest.NewDriver(1))
	id := n.NewSession("s")
	seedTranscript(b, tr, id, 20_000)
	b.ReportAllocs()
	for b.Loop() {
		snap, err := n.Inst.Snapshot(ctx, id, 0, 50)
		if err != nil {
			b.Fatal(err)
		}
		if len(snap.Messages) != 50 {
			b.Fatalf("got %d messages, want 50", len(snap.Messages))
		}
	}
}
