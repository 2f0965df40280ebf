package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// binary is the revenant binary TestMain built for this run.
var binary string

// kills counts the SIGKILLs the tests sent to a serving revenant (the
// cleanup of a test that is already over does not count).
var kills atomic.Int64

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "revenant-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: make a directory for the binary:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "revenant")
	if err := build(binary); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := buildGuest(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer removeObjects()
	defer endGroupsBeforeTimeout()()
	code := m.Run()
	fmt.Printf("e2e: %d SIGKILLs sent to a serving revenant\n", kills.Load())
	return code
}

// build compiles ./cmd/revenant of the module this package belongs to.
func build(out string) error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("build revenant: %w", err)
	}
	root := filepath.Dir(wd) // the test runs in e2e/
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("build revenant: no go.mod above %s: %w", wd, err)
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/revenant")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build revenant: %w\n%s", err, b)
	}
	return nil
}
