//go:build !js

package worker_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/worker"
)

// Natively only: package host takes log/slog's Logger, which core/logs is
// not on js (core/logs/doc.go).

// The front's id rule is the local server's (host.ValidTreeID), byte for
// byte, for every part of a session id: an id one host refuses, the other
// must refuse before any object is named for it.
func TestValidIDIsTheLocalServersRule(t *testing.T) {
	for b := 0; b < 256; b++ {
		part := "a" + string([]byte{byte(b)}) + "z"
		if b == '.' {
			continue // the separator of parts
		}
		_, ok := worker.ValidID(part)
		assert.Equal(t, host.ValidTreeID(part), ok, "byte %#x", b)
		_, ok = worker.ValidID("root." + part)
		assert.Equal(t, host.ValidTreeID(part), ok, "a child part with byte %#x", b)
	}
	for _, n := range []int{0, 1, host.MaxTreeIDLen, host.MaxTreeIDLen + 1} {
		part := strings.Repeat("a", n)
		_, ok := worker.ValidID(part)
		assert.Equal(t, host.ValidTreeID(part), ok, "length %d", n)
	}
}
