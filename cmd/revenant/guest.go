package main

import (
	"context"
	"fmt"
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
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read guest module: %w", err)
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
