package guestbuild

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Makefile's bin/revenant.wasm is the guest users run, and Flags the
// one tests and TestGuestSize measure: they must be built the same way.
func TestMakefileBuildsTheGuestWithFlags(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	var recipe string
	for _, line := range strings.Split(string(makefile), "\n") {
		if strings.Contains(line, "GOOS=wasip1") && strings.Contains(line, "-o bin/revenant.wasm") {
			recipe = strings.ReplaceAll(line, "'", "")
		}
	}
	require.NotEmpty(t, recipe, "the Makefile has no recipe building bin/revenant.wasm")
	for _, flag := range Flags {
		require.Contains(t, recipe, " "+flag+" ", "the Makefile's guest is not built with %q", flag)
	}
	require.Contains(t, recipe, " "+Package)
}
