package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveWithGuest runs serve with -guest path and a context already
// cancelled, so a guest that were accepted would make serve return at once
// rather than serve: the error is what start-up made of the path.
func serveWithGuest(t *testing.T, path string) error {
	t.Helper()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	return serve(stopped, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-guest", path}, env(nil), io.Discard)
}

// A REVENANT_GUEST or -guest path to something that is not the guest is
// refused at start after at most its first bytes, never read to the end:
// a device such as /dev/zero was read until memory ran out (14 GB in a
// probe, the server deaf to SIGTERM meanwhile), and a huge file was read
// whole before compiling it failed.
func TestGuestModuleThatIsNoGuestRefusedUnread(t *testing.T) {
	dir := t.TempDir()

	// A file over the cap, sparse so it takes no disk, refused by its size.
	big := filepath.Join(dir, "big.wasm")
	f, err := os.Create(big)
	require.NoError(t, err)
	_, err = f.Write(wasmMagic)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxGuestBytes+1))
	require.NoError(t, f.Close())
	err = serveWithGuest(t, big)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "guest module "+big+": larger than 268435456 bytes; is it the guest .wasm")

	// Text (a README given by mistake) is no WebAssembly module.
	text := filepath.Join(dir, "README.md")
	require.NoError(t, os.WriteFile(text, []byte("# revenant\n"), 0o600))
	err = serveWithGuest(t, text)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "guest module "+text+": not a WebAssembly module")

	// So is a file shorter than the magic number, an empty one included.
	empty := filepath.Join(dir, "empty.wasm")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = readGuestModule(empty)
	assert.ErrorContains(t, err, "not a WebAssembly module")

	if _, statErr := os.Stat("/dev/zero"); statErr == nil {
		err = serveWithGuest(t, "/dev/zero")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "guest module /dev/zero: not a WebAssembly module")
		// simulate -guest reads the module the same way.
		err = simulate(context.Background(), []string{"-guest", "/dev/zero"}, env(nil), io.Discard)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "guest module /dev/zero: not a WebAssembly module")
	}

	// A missing file is still named as one.
	_, err = readGuestModule(filepath.Join(dir, "missing.wasm"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// A module that begins as WebAssembly is read whole and unchanged: the
// checks cost a real guest nothing.
func TestGuestModuleReadWhole(t *testing.T) {
	module := append(append([]byte{}, wasmMagic...), 1, 0, 0, 0, 0xff, 0x00, 0x7f)
	path := filepath.Join(t.TempDir(), "g.wasm")
	require.NoError(t, os.WriteFile(path, module, 0o600))
	got, err := readGuestModule(path)
	require.NoError(t, err)
	assert.Equal(t, module, got)
}
