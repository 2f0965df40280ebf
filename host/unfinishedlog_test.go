package host_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Open removes trees whose create was cut before they became ready, and
// says so: one Info line per tree, naming it and its principal, so an
// operator can match a client's failed or hung create to what became of
// it. A ready tree is not mentioned.
func TestOpenLogsEachUnfinishedTreeItRemoves(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "kept")
	require.NoError(t, h.Close(ctx))

	e.execIndex(`INSERT INTO trees (id, principal, created_at, ready) VALUES ('ghost1', 'alice', 1, 0), ('ghost2', 'bob', 2, 0)`) // what two kills mid-create left

	var mu sync.Mutex
	var buf bytes.Buffer
	cfg := e.config()
	cfg.Log = slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	e.open(cfg)

	mu.Lock()
	defer mu.Unlock()
	removed := map[string]string{} // tree -> principal
	for line := range bytes.Lines(buf.Bytes()) {
		var rec struct {
			Level, Msg, Tree, Principal string
		}
		require.NoError(t, json.Unmarshal(line, &rec), "%s", line)
		if rec.Msg != "removed a tree whose create never finished" {
			continue
		}
		assert.Equal(t, "INFO", rec.Level)
		_, dup := removed[rec.Tree]
		assert.False(t, dup, "one line per tree: %s", rec.Tree)
		removed[rec.Tree] = rec.Principal
	}
	assert.Equal(t, map[string]string{"ghost1": "alice", "ghost2": "bob"}, removed, "log:\n%s", buf.String())
}
