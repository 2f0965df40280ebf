package sim

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A boot that met a boot fault (a failing disk, another connection's
// write lock) after its sweep listed the claims, and then failed other
// than by a kill, is a failure of the run: the guest must serve (wasm/guest
// bootResult). The campaigns cannot show this check firing, as the guest
// serves there; without it a guest that no longer did would pass them
// (plants52 P36).
func TestBootThatFailsAfterABootFaultIsAFailure(t *testing.T) {
	cases := []struct {
		name    string
		faulted bool
		err     error
		fails   bool
	}{
		{"faulted, then failed", true, errors.New("list sessions: database is locked"), true},
		{"faulted, then killed", true, fmt.Errorf("boot: %w", errKill), false},
		{"no fault, failed", false, errors.New("disk I/O error"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := &tree{}
			g := &guest{t: tr, boot: 3}
			if c.faulted {
				g.faulted = &bootFaulter{}
			}
			tr.checkBootServed(g, c.err)
			if c.fails {
				assert.Equal(t, []string{"boot 3 failed where its sweep met a boot fault: " + c.err.Error()}, tr.failures)
			} else {
				assert.Empty(t, tr.failures)
			}
		})
	}
}
