package storagetest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/storage/storagetest"
)

// refuseAll is a DB whose every transaction fails before fn runs, and that
// has none of the optional capabilities.
type refuseAll struct{}

func (refuseAll) Tx(context.Context, func(storage.Tx) error) error { return errors.New("refused") }

// The suite skips what a DB has no capability for, fails a DB that stores
// nothing, and fails a Skip that names no test (so a stale excuse cannot
// stay).
func TestSuiteSkipsAndFails(t *testing.T) {
	r := conform.Record("suite", func(ct conform.T) {
		storagetest.RunT(ct, func(conform.T) storage.DB { return refuseAll{} },
			storagetest.Skip{Test: "tx/no such test", Why: "stale"})
	})
	assert.True(t, r.Failed())
	assert.Contains(t, r.Failures(), "suite/tx/commits when fn returns nil")
	assert.Contains(t, r.Logs(), `storagetest: Skip "tx/no such test" names no test of the suite`)
	for _, name := range []string{
		"suite/busy/BUSY past the busy wait is coded and transient",
		"suite/busy/the context ends a busy wait",
		"suite/commit/a failed commit left open is rolled back before the next transaction",
		"suite/closed/a closed DB refuses with ErrClosed",
	} {
		assert.NotContains(t, r.Failures(), name)
	}
}
