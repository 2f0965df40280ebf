package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/backend"
	"github.com/revenantrt/revenant/wasm/runtime"
	wasmserve "github.com/revenantrt/revenant/wasm/runtime/serve"
)

// guestRuntime is the wazero backend every tree runs on under -guest (the
// host imports no wasm package: this is where the two meet), with the same
// model, tools, session defaults and principals as the in-process server.
// Secrets stay here: the provider key and webhook secrets with the host's
// egress, the API tokens hashed. The compiled guest is kept in cacheDir
// ("": <data>/wasm-cache).
func guestRuntime(ctx context.Context, path, cacheDir, dataDir string, run setup, tokens string, log *slog.Logger) (host.GuestRuntime, error) {
	wasm, err := readGuestModule(path)
	if err != nil {
		return nil, err
	}
	boot, err := guestBoot(run, tokens)
	if err != nil {
		return nil, err
	}
	if cacheDir == "" {
		cacheDir = filepath.Join(dataDir, "wasm-cache")
	}
	rt, err := backend.New(ctx, backend.Config{Wasm: wasm, CacheDir: cacheDir, Boot: boot,
		Model: wasmserve.ModelEgress{APIKey: run.apiKey}, Tools: run.hostTools, Log: log})
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return rt, nil
}

// maxGuestBytes caps the guest module a path may give: the guest is about
// 6 MB (a build without -ldflags='-s -w' a few times that), so this leaves
// room for any real build while a wrong path cannot have the server read
// without end.
const maxGuestBytes = 256 << 20

// wasmMagic opens every WebAssembly binary module.
var wasmMagic = []byte("\x00asm")

// readGuestModule reads the guest .wasm at path (REVENANT_GUEST, -guest).
// A wrong path must fail at start, not take the machine: a device such as
// /dev/zero would otherwise be read until memory runs out (os.ReadFile has
// no bound, and the server does not yet act on SIGTERM then), so a file that
// does not begin as a WebAssembly module is refused after its first bytes,
// and one over maxGuestBytes before it is read (or, when its size is not
// known beforehand, once it passes the cap).
func readGuestModule(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read guest module: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > maxGuestBytes {
		return nil, fmt.Errorf("guest module %s: larger than %d bytes; is it the guest .wasm (make guest builds bin/revenant.wasm)?", path, maxGuestBytes)
	}
	head := make([]byte, len(wasmMagic))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, wasmMagic) {
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("read guest module: %w", err)
		}
		return nil, fmt.Errorf("guest module %s: not a WebAssembly module; is it the guest .wasm (make guest builds bin/revenant.wasm)?", path)
	}
	// One byte past the cap tells a module at the cap from a larger one.
	rest, err := io.ReadAll(io.LimitReader(f, maxGuestBytes-int64(len(head))+1))
	if err != nil {
		return nil, fmt.Errorf("read guest module: %w", err)
	}
	if len(head)+len(rest) > maxGuestBytes {
		return nil, fmt.Errorf("guest module %s: larger than %d bytes; is it the guest .wasm (make guest builds bin/revenant.wasm)?", path, maxGuestBytes)
	}
	return append(head, rest...), nil
}

// guestBoot is the boot configuration every guest of this server gets: the
// same settings, model and tools the in-process server runs with, and the
// API tokens as stand-ins (never the tokens themselves).
func guestBoot(run setup, tokens string) (runtime.BootConfig, error) {
	boot := runtime.BootConfig{Tools: wasmserve.Declare(run.hostTools), Settings: run.settings, Permissions: run.rules, AllowedModels: run.models}
	if run.baseURL == "" {
		boot.Model = abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: run.wordDelay}
	} else {
		boot.Model = abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: run.baseURL, Name: run.modelName}
	}
	if tokens != "" {
		var err error
		if boot.API.Tokens, err = host.HashTokens(tokens); err != nil {
			return runtime.BootConfig{}, err
		}
	}
	d := run.defaults
	boot.API.SystemPrompt, boot.API.ModelName, boot.API.Tools = d.SystemPrompt, d.Model, d.Tools
	return boot, nil
}
