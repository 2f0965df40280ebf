package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/revenantrt/revenant/internal/guestbuild"
)

// The suite runs every scenario in each mode of the server, as a subtest
// named after the mode: in process (trees are core.Instances in the server
// process) and guest (-guest: trees are WebAssembly guests on wazero).
// REVENANT_E2E_MODE=inprocess or guest runs one mode; unset runs both.
const (
	modeInProcess = "inprocess"
	modeGuest     = "guest"
	modeEnv       = "REVENANT_E2E_MODE"
)

// guestWasm is the guest module TestMain built, when guest mode runs.
var guestWasm string

// modes lists the modes this run covers.
func modes() ([]string, error) {
	switch m := os.Getenv(modeEnv); m {
	case "":
		return []string{modeInProcess, modeGuest}, nil
	case modeInProcess, modeGuest:
		return []string{m}, nil
	default:
		return nil, fmt.Errorf("%s=%q: want %s or %s (unset: both)", modeEnv, m, modeInProcess, modeGuest)
	}
}

// buildGuest builds the guest module if guest mode runs.
func buildGuest() error {
	ms, err := modes()
	if err != nil {
		return err
	}
	if !slices.Contains(ms, modeGuest) {
		return nil
	}
	_, guestWasm, err = guestbuild.Build()
	return err
}

// eachMode runs f as a subtest per mode.
func eachMode(t *testing.T, f func(t *testing.T)) {
	ms, err := modes()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		t.Run(m, f)
	}
}

// modeOf is the mode of the eachMode subtest t belongs to.
func modeOf(t *testing.T) string {
	for _, part := range strings.Split(t.Name(), "/") {
		if part == modeInProcess || part == modeGuest {
			return part
		}
	}
	t.Fatalf("test %s does not run under eachMode", t.Name())
	return ""
}

// modeArgs is the server's extra command line in t's mode. Guests share
// one compilation cache across the run (guestbuild.CacheDir), so only the
// first server of a run compiles the module.
func modeArgs(t *testing.T) []string {
	if modeOf(t) == modeGuest {
		return []string{"-guest=" + guestWasm, "-wasm-cache=" + guestbuild.CacheDir()}
	}
	return nil
}
