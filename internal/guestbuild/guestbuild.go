package guestbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// Package is the guest's import path, relative to the module root.
const Package = "./wasm/guest"

// Flags are the go build flags of every guest build, the Makefile's guest
// target's too: a reactor (c-shared), without file paths, symbol table
// and DWARF (-trimpath, -s -w), which the guest never reads: its runtime
// symbolizes from pclntab. Stripping keeps the name section out, so a
// wazero trap prints function indexes instead of names. revenant's own
// packages are compiled without inlining (-l), which keeps the guest
// inside issue 17's 1.5 MiB gzipped: core and the packages under it
// saved about 30 KB (1.543 against 1.573 MB at gzip -9), recovery, the
// tools and the guest's own package 5 KB more (1,550,508 against
// 1,555,501 bytes at gzip -9, session 57). The standard library, the
// runtime above all, and the SQL round trip's path (wasm/abi,
// wasm/guestdb: the later patterns, which give them back their
// inlining) keep it: compiling those without inlining cost a statement
// about a fifth more (docs/RATIONALE.md, "A lean guest"). fmt is the
// one standard package built without inlining: it formats errors, log
// lines and a few ids, never a statement or an event's frame, and
// inlined it weighed 11 KB gzipped (1,555,197 against 1,543,876 bytes at
// gzip -9, session 59), room the guest had run out of. internal/fmtsort
// (fmt's map printing), net/url (the model's and the web tool's URLs) and
// time are built without it too (session 64: 1,557,331 against 1,568,728
// bytes by TestGuestSize): revenant's own packages, built -l, never
// inline their functions anyway, so only their calls to their own helpers
// pay, and the simulator's campaign showed no CPU cost above its noise.
var Flags = []string{"-buildmode=c-shared", "-trimpath",
	"-gcflags=" + module + "/...=-l", "-gcflags=" + module + "/wasm/abi=", "-gcflags=" + module + "/wasm/guestdb=",
	"-gcflags=fmt=-l", "-gcflags=internal/fmtsort=-l", "-gcflags=net/url=-l", "-gcflags=time=-l", "-ldflags=-s -w"}

const module = "github.com/revenantrt/revenant"

var (
	once sync.Once
	path string
	wasm []byte
	err  error
)

// Build builds the guest once per process and returns its bytes and the
// file it was written to. The file lives in the user cache directory
// (revenant/guest) under a name derived from its content, so two
// checkouts testing at once never hand each other's guest to a test: the
// bytes are read from this process's own build before the file is
// published, and a different guest gets a different name. The go build
// cache makes the rebuild a relink.
func Build() (bytes []byte, file string, e error) {
	once.Do(func() { wasm, path, err = build("") })
	return wasm, path, err
}

// TestHooksTag is the build tag of the test guest (MustTestHooks): the
// guest's test hooks (wasm/guest's testhooks_on.go) provoke, on a request's
// say, what no route does on purpose, such as a failure after the head.
// The guest users run is built without it.
const TestHooksTag = "revenant_testhooks"

var (
	hooksOnce sync.Once
	hooksWasm []byte
	hooksErr  error
)

// MustTestHooks is Must for the test guest: the guest built with
// TestHooksTag, once per process.
func MustTestHooks(tb TB) []byte {
	tb.Helper()
	hooksOnce.Do(func() { hooksWasm, _, hooksErr = build(TestHooksTag) })
	if hooksErr != nil {
		tb.Fatalf("build test guest: %v", hooksErr)
	}
	return hooksWasm
}

// TB is the part of testing.TB that Must uses; taking it instead of
// testing.TB keeps the testing package out of the revenant binary, which
// builds the guest for `revenant simulate`.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Must is Build for tests and benchmarks: it fails tb on error.
func Must(tb TB) []byte {
	tb.Helper()
	b, _, err := Build()
	if err != nil {
		tb.Fatalf("build guest: %v", err)
	}
	return b
}

// build builds the guest with the build tags tags (none if empty).
func build(tags string) ([]byte, string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "revenant", "guest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("build guest: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "revenant-*.wasm.tmp")
	if err != nil {
		return nil, "", fmt.Errorf("build guest: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	args := append([]string{"build"}, Flags...)
	if tags != "" {
		args = append(args, "-tags="+tags)
	}
	args = append(args, "-o", tmp.Name(), Package)
	cmd := exec.Command(gobin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("build guest: %w\n%s", err, out)
	}
	b, err := os.ReadFile(tmp.Name())
	if err != nil {
		return nil, "", fmt.Errorf("build guest: %w", err)
	}
	sum := sha256.Sum256(b)
	final := filepath.Join(dir, "revenant-"+hex.EncodeToString(sum[:8])+".wasm")
	// Same content, same name: a concurrent rename of an identical build
	// replaces the file with equal bytes.
	if err := os.Rename(tmp.Name(), final); err != nil {
		return nil, "", fmt.Errorf("build guest: %w", err)
	}
	return b, final, nil
}

// moduleRoot is the repository root: two levels above this file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("build guest: cannot locate the module root")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("build guest: no go.mod at %s: %w", root, err)
	}
	return root, nil
}

// CacheDir is a wazero compilation cache shared by every test binary of
// this user (revenant/wazero under the user cache directory): compiling
// the guest takes seconds, and wazero keys the cache by the module's hash
// and its own version, so a stale entry is never used.
func CacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "revenant", "wazero")
}
