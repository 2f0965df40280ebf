//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the file in the data directory a serving process holds an
// exclusive lock on, with its pid in it for the message another one gets.
const lockName = "LOCK"

// lockDataDir takes the data directory for this process, creating the
// directory if needed, or fails saying which process has it. Two servers
// on one directory would each boot its trees: every boot takes a new
// epoch, so they would fence each other's turns in turn (the second does
// it before it even finds its address taken). The kernel drops the lock
// when the process ends, SIGKILL included, so a kill never leaves it
// behind; release drops it at a graceful exit.
func lockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf("another revenant server (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by %s: stop it, or give this one another -data", dir, holder)
		}
		return nil, fmt.Errorf("data directory %s: lock %s: %w", dir, lockName, err)
	}
	// The pid is only for the message above; the lock is what counts.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
