// Package archtest holds the architecture test: the module's dependency
// rules (DESIGN §3) as a table, checked against `go list -deps` for every
// target the code builds for (linux/amd64, js/wasm, wasip1/wasm). A new
// import that points a forbidden way fails `go test ./...`, naming the
// chain of imports that leads there and the rule's reason.
//
// The rules in short: dependencies point inward, adapters (host, wasm/...,
// cmd, durableobject, worker) → recovery → core, never back; core and
// recovery reach no platform package (syscall/js, wazero, ncruces,
// syumai); sqlitedb is a leaf both host/ and wasm/ use; host/ imports
// nothing under wasm/, and of wasm/ only wasm/backend (the implementation
// of host.GuestRuntime) imports host/; e2e is black-box.
//
// The package has no code of its own; its test is its content.
package archtest
