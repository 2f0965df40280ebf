package main

import (
	"fmt"
	"os"

	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	wasmserve "github.com/revenantrt/revenant/wasm/runtime/serve"
)

// guestConfig is what every tree's guest runs with under -guest: the same
// model, tools, session defaults and principals as the in-process server.
// Secrets stay here: the provider key and webhook secrets with the host's
// egress, the API tokens hashed.
func guestConfig(path string, run setup, tokens string) (*host.GuestConfig, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read guest module: %w", err)
	}
	boot := runtime.BootConfig{Tools: wasmserve.Declare(run.hostTools), Settings: run.settings}
	if run.baseURL == "" {
		boot.Model = abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: run.wordDelay}
	} else {
		boot.Model = abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: run.baseURL, Name: run.modelName}
	}
	if tokens != "" {
		if boot.API.Tokens, err = host.HashTokens(tokens); err != nil {
			return nil, err
		}
	}
	d := run.defaults
	boot.API.SystemPrompt, boot.API.ModelName, boot.API.Tools = d.SystemPrompt, d.Model, d.Tools
	return &host.GuestConfig{Wasm: wasm, Boot: boot, Model: wasmserve.ModelEgress{APIKey: run.apiKey}, Tools: run.hostTools}, nil
}
