package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// -bootfault and -bootlock each set their own share: the summary names
// both as asked (a flag bound to the other's field would leave one 0 and
// its line out).
func TestSimulateBootSharesReachTheCampaign(t *testing.T) {
	var out strings.Builder
	err := simulate(context.Background(), []string{"-seed", "4", "-sessions", "1", "-kills", "1", "-bootfault", "0.25", "-bootlock", "0.5",
		"-workers", "1", "-guest", guestFile(t), "-keep", t.TempDir()}, env(nil), &out)
	require.NoError(t, err, out.String())
	assert.Contains(t, out.String(), "boot faults (share 0.25):")
	assert.Contains(t, out.String(), "boot locks (share 0.50):")
}
