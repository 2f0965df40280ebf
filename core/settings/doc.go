// Package settings is the one configuration type every host gives a tree:
// the knobs of core's instance (resume budget, wake interval, claim age,
// interrupt grace), of the turn runner (step cap, watchdogs, checkpoints,
// provider retries, context size, sub-agents per tree) and of the HTTP API
// (heartbeat, body cap, page sizes). The local server reads it from REVENANT_CONFIG's "settings"
// section (config), the wazero host hands it to the guest in its boot
// configuration (wasm/abi), and the Durable Object host builds it too; each
// maps it onto core's, the runner's and the API's builders with the same
// function, Configs, so a knob means the same thing on every host.
//
// The zero Settings is the documented defaults, field by field: zero means
// "the default", never "zero". The two counts where zero is a meaningful
// value (no resumes, no provider retries) take None for it.
//
// Validate reports every problem at once, each naming its field by the
// name a configuration file uses (Fields); Configs validates first, so the
// builders it returns are always valid.
//
// The package imports core, core/runner and core/api, and nothing of any
// host: it builds for every target core builds for.
package settings
