package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// BenchmarkTranscriptSizesOfALongSession is the query planTranscript runs
// before every model request of a session, on one whose transcript holds
// n messages of 2 KB (a third each user, assistant and tool), read on a
// connection kept open as the instance's is. It reads a row of every
// message the session has had, however few the request sends: its cost
// grows with the session's history, not with the context size.
func BenchmarkTranscriptSizesOfALongSession(b *testing.B) {
	for _, n := range []int{2_000, 20_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			tr := treetest.New(b)
			node := tr.Boot(treetest.NewDriver(1))
			id := node.NewSession("s")
			text := strings.Repeat("x", 2<<10)
			roles := []string{"user", "assistant", "tool"}
			tr.Read(func(tx storage.Tx) error {
				for i := range n {
					if _, err := tx.Exec(`INSERT INTO messages (id, session_id, seq, prompt_id, role, text, created_at) VALUES (?, ?, ?, ?, ?, ?, 0)`,
						fmt.Sprintf("msg-%d", i), id, 1_000_000+i, fmt.Sprintf("prompt-%d", i/3), roles[i%3], text); err != nil {
						return err
					}
				}
				return nil
			})
			_, db, _ := tr.Host()
			want := n - n/3 // every message but the tool results
			b.ReportAllocs()
			for b.Loop() {
				got := 0
				if err := db.Tx(context.Background(), func(tx storage.Tx) error {
					res, err := tx.Query(transcriptSizes, transcriptSizesArgs(id)...)
					got = res.Len()
					return err
				}); err != nil {
					b.Fatal(err)
				}
				if got != want {
					b.Fatalf("read %d sizes, want %d", got, want)
				}
			}
		})
	}
}
