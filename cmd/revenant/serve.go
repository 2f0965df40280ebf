package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/host"
)

// Defaults of the local server.
const (
	defaultAddr      = "127.0.0.1:8787"
	defaultData      = "data"
	defaultWordDelay = 30 * time.Millisecond
	shutdownTimeout  = 10 * time.Second
)

// serveConfig is the server's configuration from flags and environment.
type serveConfig struct {
	addr      string
	data      string
	tokens    string
	origins   string // REVENANT_ALLOWED_ORIGINS
	wordDelay time.Duration
	logLevel  slog.Level
	guest     string // the guest .wasm: trees run as WebAssembly guests
	wasmCache string // wazero's compilation cache; "": <data>/wasm-cache
	maxOpen   int    // host.Config.MaxOpenTrees
}

// serveAbout is the paragraph of serve's usage: what it reads from the
// environment besides its flags.
const serveAbout = `Serves the HTTP API (docs/api.md). Configuration from the environment:
  REVENANT_ADDR            listen address (-addr; default ` + defaultAddr + `)
  REVENANT_DATA            data directory (-data; default ` + defaultData + `)
  REVENANT_TOKENS          principal:token,... bearer tokens; unset: one anonymous
                           principal, loopback only
  REVENANT_ALLOWED_ORIGINS comma-separated browser origins allowed to call the API
                           (default none: a request with an Origin header is refused)
  REVENANT_CONFIG          JSON file: webhook_tools, permissions, egress, session_defaults,
                           allowed_models, settings (resume budget, step cap, watchdogs,
                           page sizes, …)
  OPENAI_BASE_URL, OPENAI_API_KEY, REVENANT_MODEL   the model provider (default: offline)
  REVENANT_MAX_OPEN_TREES  how many trees may be open at once (-max-open-trees)
  REVENANT_GUEST, REVENANT_WASM_CACHE               as -guest and -wasm-cache`

// parseServe reads serve's configuration; done reports that it printed the
// usage (-h) and the server must not start.
func parseServe(args []string, getenv func(string) string, stdout io.Writer) (c serveConfig, done bool, err error) {
	c = serveConfig{addr: getenv("REVENANT_ADDR"), data: getenv("REVENANT_DATA"), tokens: getenv("REVENANT_TOKENS"), origins: getenv("REVENANT_ALLOWED_ORIGINS"), guest: getenv("REVENANT_GUEST"),
		wasmCache: getenv("REVENANT_WASM_CACHE")}
	if c.addr == "" {
		c.addr = defaultAddr
	}
	if c.data == "" {
		c.data = defaultData
	}
	fs := newFlagSet("serve", " [flags]", serveAbout)
	fs.StringVar(&c.addr, "addr", c.addr, "listen address (REVENANT_ADDR)")
	fs.StringVar(&c.data, "data", c.data, "data directory (REVENANT_DATA)")
	fs.DurationVar(&c.wordDelay, "offline-word-delay", defaultWordDelay, "delay between words of the offline model")
	fs.StringVar(&c.guest, "guest", c.guest, "run every tree as a WebAssembly guest of this .wasm (built by make guest: bin/revenant.wasm) on wazero, instead of in this process (REVENANT_GUEST)")
	fs.StringVar(&c.wasmCache, "wasm-cache", c.wasmCache, "with -guest: directory of the compiled guest code, kept between runs (REVENANT_WASM_CACHE; default <data>/wasm-cache)")
	// A valid REVENANT_MAX_OPEN_TREES is the flag's default, so -h shows
	// the number in force; an invalid one is refused below unless the flag
	// overrides it.
	envMaxOpen := getenv("REVENANT_MAX_OPEN_TREES")
	defaultMaxOpen, envMaxOpenBad := host.DefaultMaxOpenTrees, false
	if n, err := strconv.Atoi(envMaxOpen); err == nil && n >= 1 {
		defaultMaxOpen = n
	} else if envMaxOpen != "" {
		envMaxOpenBad = true
	}
	fs.IntVar(&c.maxOpen, "max-open-trees", defaultMaxOpen, "how many trees may be open at once: opening one more closes the least recently used idle tree, or is refused 503 if none is idle (REVENANT_MAX_OPEN_TREES)")
	debug := fs.Bool("debug", false, "log at debug level")
	if done, err := parseFlags(fs, args, stdout); done || err != nil {
		return c, done, err
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "max-open-trees" })
	switch {
	case given: // the flag wins: the variable is not checked
		if c.maxOpen < 1 {
			return c, false, fmt.Errorf("-max-open-trees: %d is not 1 or more", c.maxOpen)
		}
	case envMaxOpenBad:
		return c, false, fmt.Errorf("REVENANT_MAX_OPEN_TREES: %q is not a whole number of 1 or more", envMaxOpen)
	}
	if c.wordDelay < 0 {
		return c, false, fmt.Errorf("-offline-word-delay: %v is negative (want 0 or more, e.g. 30ms)", c.wordDelay)
	}
	if err := checkAddr(c.addr); err != nil {
		return c, false, err
	}
	if err := host.CheckDataDir(c.data); err != nil {
		return c, false, fmt.Errorf("REVENANT_DATA or -data: %w", err) // before the lock file is made in it
	}
	if *debug {
		c.logLevel = slog.LevelDebug
	}
	return c, false, nil
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, done, err := parseServe(args, getenv, stdout)
	if done || err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))

	var auth api.Authenticator = api.Anonymous{}
	if cfg.tokens != "" {
		tokens, err := api.ParseTokens(cfg.tokens)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		auth = tokens
	} else if !loopbackOnly(cfg.addr) {
		return fmt.Errorf("serve: REVENANT_TOKENS is not set, so the server is anonymous and may only listen on loopback, not %q", cfg.addr)
	}
	clock := host.RealClock{}
	// Set once the server listens, before any tree (and so any tool) runs.
	var listening netip.AddrPort
	run, err := buildSetup(getenv, clock, cfg.wordDelay, func() netip.AddrPort { return listening }, log)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	apiCfg, err := apiConfig(cfg, run.configs.API)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	// Listen before anything touches the data directory, so a taken port
	// stops the server with nothing created; connections wait in the
	// backlog until the host is open.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("serve: %w (set REVENANT_ADDR or -addr)", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
		listening = tcp.AddrPort()
	}
	serving := false
	defer func() {
		if !serving {
			ln.Close()
		}
	}()
	unlock, err := lockDataDir(cfg.data)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer unlock()
	hc := host.Config{DataDir: cfg.data, Core: run.configs.Core, Driver: run.driver, MaxOpenTrees: cfg.maxOpen, Clock: clock, IDs: host.RandomIDs{}, Log: log}
	if cfg.guest != "" {
		if hc.Guest, err = guestRuntime(ctx, cfg.guest, cfg.wasmCache, cfg.data, run, cfg.tokens, log); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	trees, err := host.Open(ctx, hc)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	handler, err := newHandler(cfg, &run, trees, auth, apiCfg, clock, log)
	if err != nil {
		return errors.Join(err, trees.Close(context.Background()))
	}
	serving = true
	logServing(log, cfg, &run, ln.Addr().String())
	go func() {
		<-trees.Recovered()
		st := trees.Stats()
		log.Info("recovery done", "trees_booted", st.BootedAtOpen)
	}()
	return serveUntilStopped(ctx, ln, handler, trees, log)
}

// apiConfig is the API's configuration in either mode, from base (the
// settings' API knobs). A page in a browser may call the API only from an
// allowed origin; without tokens, only requests addressed to loopback are
// answered (DNS rebinding).
func apiConfig(cfg serveConfig, base api.Config) (api.Config, error) {
	origins, err := api.ParseOrigins(cfg.origins)
	if err != nil {
		return api.Config{}, fmt.Errorf("REVENANT_ALLOWED_ORIGINS: %w", err)
	}
	return base.WithAllowedOrigins(origins...).WithLoopbackOnly(cfg.tokens == ""), nil
}

// checkAddr refuses a listen address that is not host:port, before
// anything else judges it (the loopback rule would blame missing tokens).
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	// The port is a number: "unix:/path" splits as host "unix", port
	// "/path", and would fail later as an unknown TCP service.
	if n, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || n > 65535 {
		return fmt.Errorf("listen address %q is not host:port with a numeric port, e.g. %s; only TCP is served (REVENANT_ADDR or -addr)", addr, defaultAddr)
	}
	return nil
}

// loopbackOnly reports whether addr can only be reached from this machine.
// Host names are case-insensitive: LOCALHOST is localhost.
func loopbackOnly(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// redactURL hides credentials embedded in a URL before it is logged.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// netHandler serves an httpmsg handler (core/api's) on net/http, with the
// handler's Close.
type netHandler struct {
	http.Handler
	close func()
}

func (h netHandler) Close() { h.close() }

// closingHandler is the API's handler with its Close, which ends the event
// streams it serves.
type closingHandler interface {
	http.Handler
	Close()
}

// newHandler is the API over trees: the guest host's (each tree a guest
// that runs core/api) under -guest, core/api's own in process.
func newHandler(cfg serveConfig, run *setup, trees *host.Host, auth api.Authenticator, apiCfg api.Config, clock host.RealClock, log *slog.Logger) (closingHandler, error) {
	apiCfg = apiCfg.WithSessionDefaults(run.defaults).WithAllowedModels(run.models)
	if cfg.guest != "" {
		// The host checks a create as its guests will (their boot has the
		// same defaults and allowed models) before it opens a tree for it.
		return host.NewGuestHandler(trees, auth, apiCfg, log)
	}
	a, err := api.New(api.Deps{Trees: trees, Auth: auth, Clock: clock, IDs: host.RandomIDs{}, Log: log}, apiCfg)
	if err != nil {
		return nil, err
	}
	return netHandler{nethttp.Handler(a), a.Close}, nil
}

// logServing says, once the server serves, where and with what: the
// address the e2e tests wait for, the model, the tools, the auth mode.
func logServing(log *slog.Logger, cfg serveConfig, run *setup, addr string) {
	log.Info("revenant serving", "addr", "http://"+addr, "data", cfg.data, "version", version)
	if run.provider == "offline" {
		log.Info("model", "name", run.model, "note", "no provider configured: answers come from the offline model (docs/offline-model.md)")
	} else {
		log.Info("model", "name", run.model, "provider", redactURL(run.provider))
	}
	log.Info("tools", "names", run.tools, "egress", run.egress)
	if cfg.guest != "" {
		log.Info("trees run as WebAssembly guests", "module", cfg.guest)
	}
	if cfg.tokens == "" {
		log.Info("auth off: no REVENANT_TOKENS, one anonymous principal, loopback only")
	} else {
		log.Info("auth on: bearer tokens from REVENANT_TOKENS")
	}
	if cfg.origins != "" {
		log.Info("browser origins allowed", "origins", cfg.origins)
	}
}

// serveUntilStopped serves handler on ln until ctx ends or serving fails,
// then stops gracefully: end streams, stop accepting, then stop every
// tree; its running turns record interrupted{shutdown} and resume at the
// next boot. Each phase has its own deadline: a stalled client must not
// use up the time the trees need to record their shutdown.
func serveUntilStopped(ctx context.Context, ln net.Listener, handler closingHandler, trees *host.Host, log *slog.Logger) error {
	// No WriteTimeout: event streams are long-lived responses. Each write
	// has its own deadline instead (writeStall).
	srv := &http.Server{Handler: stallLimit(closeUnread(handler), writeStall), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-served:
	case <-ctx.Done():
		log.Info("shutting down: recording shutdown and keeping claims")
	}
	handler.Close()
	httpCtx, cancelHTTP := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancelHTTP()
	if serr := srv.Shutdown(httpCtx); serr != nil {
		_ = srv.Close() // drop connections that would not finish in time
	}
	treesCtx, cancelTrees := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancelTrees()
	if cerr := trees.Close(treesCtx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
