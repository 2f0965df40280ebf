package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/schema"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/sqlitedb"
)

// env is a getenv over a map.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// A bare token in REVENANT_TOKENS (no principal:) stops the server at
// start-up with an error that prints no part of it.
func TestStartupErrorPrintsNoToken(t *testing.T) {
	const token = "Zq8xW4vR-k2Jm9Pt" // shares no 4 characters with the message
	for _, spec := range []string{token, "alice:ok-token," + token} {
		err := serve(context.Background(), []string{"-data", t.TempDir()}, env(map[string]string{"REVENANT_TOKENS": spec}), io.Discard)
		require.Error(t, err)
		for i := 0; i+4 <= len(token); i++ {
			assert.NotContains(t, err.Error(), token[i:i+4], "the start-up error prints part of the token")
		}
	}
}

// Every way of asking for help prints the usage asked for, with the
// commands or the command's flags, and succeeds (exit 0); none starts the
// server.
func TestHelpPrintsUsage(t *testing.T) {
	commands := []string{"serve", "simulate", "version", "help"}
	serveFlags := []string{"-addr", "-data", "-guest", "-max-open-trees", "-debug", "REVENANT_TOKENS", "REVENANT_ALLOWED_ORIGINS", "REVENANT_MAX_OPEN_TREES"}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, append(commands, serveFlags...)},
		{[]string{"--help"}, append(commands, serveFlags...)},
		{[]string{"help"}, append(commands, serveFlags...)},
		{[]string{"help", "help"}, commands},
		{[]string{"serve", "-h"}, serveFlags},
		{[]string{"help", "serve"}, serveFlags},
		{[]string{"simulate", "-h"}, []string{"usage: revenant simulate", "-seed", "-sessions", "-kills", "-zombies", "-diskfull", "-bootfault", "-bootlock", "-delfault", "-reopenrace", "-flood", "-stops", "-check"}},
		{[]string{"help", "simulate"}, []string{"usage: revenant simulate", "-seed"}},
		{[]string{"version", "-h"}, []string{"usage: revenant version"}},
	}
	for _, tc := range cases {
		var out strings.Builder
		err := run(context.Background(), tc.args, &out)
		require.NoError(t, err, "%v", tc.args)
		for _, w := range tc.want {
			assert.Contains(t, out.String(), w, "%v", tc.args)
		}
	}
}

// Command-line mistakes are usage errors (exit 2) that say where help is.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"serve", "-nope"}, {"serve", "extra"}, {"simulate", "-nope"}, {"help", "nope"}, {"help", "a", "b"}, {"version", "extra"}, {"-offline-word-delay", "abc"}} {
		var out strings.Builder
		err := run(context.Background(), args, &out)
		require.ErrorIs(t, err, errUsage, "%v", args)
		assert.Empty(t, out.String(), "%v: errors go to stderr, from main", args)
		assert.NotContains(t, err.Error(), "usage", "%v: the message is the mistake, not its marker", args)
	}
	err := run(context.Background(), []string{"nope"}, io.Discard)
	assert.Contains(t, err.Error(), "revenant help")
}

// An allowed origin that is not scheme://host[:port] stops the server at
// start-up, naming the variable.
func TestBadAllowedOriginRefusedAtStart(t *testing.T) {
	// Already cancelled: a serve that accepted the origin would return at
	// once instead of serving, so this fails rather than hangs.
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	err := serve(stopped, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, env(map[string]string{"REVENANT_ALLOWED_ORIGINS": "https://console.example/app"}), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "REVENANT_ALLOWED_ORIGINS")
}

// A second server on a data directory another one holds stops at start-up
// with a message naming the holder, before it opens anything there; the
// directory is free again once the first lets go.
func TestDataDirectoryInUseRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	release, err := lockDataDir(dir)
	require.NoError(t, err)
	// Already cancelled: a serve that took no lock would open the host and
	// return at once instead of serving, so this fails rather than hangs.
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	err = serve(stopped, []string{"-data", dir, "-addr", "127.0.0.1:0"}, env(nil), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is in use by another revenant server (pid ")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing but the lock file: the host was not opened")

	release()
	again, err := lockDataDir(dir)
	require.NoError(t, err)
	again()
}

// The cap on open trees comes from REVENANT_MAX_OPEN_TREES or
// -max-open-trees (which wins), host.DefaultMaxOpenTrees without either;
// anything but a whole number of 1 or more stops the server at start-up,
// naming where it came from (the variable only when no flag is given).
func TestMaxOpenTrees(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want int
	}{
		{"", nil, host.DefaultMaxOpenTrees},
		{"8", nil, 8},
		{"8", []string{"-max-open-trees", "3"}, 3},
		{"", []string{"-max-open-trees=500"}, 500},
		{"lots", []string{"-max-open-trees", "3"}, 3}, // the flag wins: the variable is not read
	} {
		c, done, err := parseServe(tc.args, env(map[string]string{"REVENANT_MAX_OPEN_TREES": tc.env}), io.Discard)
		require.NoError(t, err, "%q %v", tc.env, tc.args)
		require.False(t, done)
		assert.Equal(t, tc.want, c.maxOpen, "%q %v", tc.env, tc.args)
	}
	for _, tc := range []struct {
		env  string
		args []string
		name string
	}{
		{"0", nil, "REVENANT_MAX_OPEN_TREES"},
		{"-1", nil, "REVENANT_MAX_OPEN_TREES"},
		{"lots", nil, "REVENANT_MAX_OPEN_TREES"},
		{"", []string{"-max-open-trees", "0"}, "-max-open-trees"},
	} {
		_, _, err := parseServe(tc.args, env(map[string]string{"REVENANT_MAX_OPEN_TREES": tc.env}), io.Discard)
		require.Error(t, err, "%q %v", tc.env, tc.args)
		assert.Contains(t, err.Error(), tc.name)
	}
}

// -h shows the cap in force: the variable's number when it sets one.
func TestMaxOpenTreesUsageShowsTheVariable(t *testing.T) {
	for env0, want := range map[string]string{"12": "(default 12)", "": fmt.Sprintf("(default %d)", host.DefaultMaxOpenTrees), "lots": fmt.Sprintf("(default %d)", host.DefaultMaxOpenTrees)} {
		var out strings.Builder
		_, done, err := parseServe([]string{"-h"}, env(map[string]string{"REVENANT_MAX_OPEN_TREES": env0}), &out)
		require.NoError(t, err)
		require.True(t, done)
		usage := out.String()
		i := strings.Index(usage, "  -max-open-trees int")
		require.GreaterOrEqual(t, i, 0, usage)
		next := strings.Index(usage[i+1:], "\n  -")
		if next < 0 {
			next = len(usage) - i - 1
		}
		assert.Contains(t, usage[i:i+1+next], want, "REVENANT_MAX_OPEN_TREES=%q", env0)
	}
}

// A negative -offline-word-delay is refused at start-up, naming the flag.
func TestNegativeWordDelayRefused(t *testing.T) {
	_, _, err := parseServe([]string{"-offline-word-delay", "-1s"}, env(nil), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-offline-word-delay: -1s is negative")
	c, _, err := parseServe([]string{"-offline-word-delay", "0"}, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Zero(t, c.wordDelay)
}

// A data directory named file:… is refused at start-up, from the variable
// or the flag, before serve makes its lock file there: SQLite would open
// its databases as URIs. An absolute path through a file: directory is
// fine.
func TestFileURIDataDirRefused(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
	}{{"file:x", nil}, {"", []string{"-data", "file:/tmp/x"}}, {"data", []string{"-data", "./file:x"}}} {
		_, _, err := parseServe(tc.args, env(map[string]string{"REVENANT_DATA": tc.env}), io.Discard)
		require.Error(t, err, "%q %v", tc.env, tc.args)
		assert.Contains(t, err.Error(), `REVENANT_DATA or -data: data directory`)
		assert.Contains(t, err.Error(), `begins with "file:", which SQLite reads as a URI, not a path`)
	}
	c, _, err := parseServe([]string{"-data", "/tmp/file:x"}, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "/tmp/file:x", c.data)
}

// A listen address that is not host:port is refused for its form, from
// the variable or the flag, before the loopback rule (which would blame
// the missing tokens) judges it.
func TestMalformedAddrRefusedForItsForm(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
	}{{"nonsense", nil}, {"", []string{"-addr", "nonsense"}}, {"127.0.0.1:", nil}, {"", []string{"-addr", "127.0.0.1"}}} {
		err := serve(context.Background(), append([]string{"-data", t.TempDir()}, tc.args...), env(map[string]string{"REVENANT_ADDR": tc.env}), io.Discard)
		require.Error(t, err, "%q %v", tc.env, tc.args)
		assert.Contains(t, err.Error(), "is not host:port", "%q %v", tc.env, tc.args)
		assert.NotContains(t, err.Error(), "REVENANT_TOKENS", "%q %v", tc.env, tc.args)
	}
}

// A listen address whose port is not a number is refused as it is read:
// "unix:/path" (only TCP is served) splits as host "unix" and port "/path"
// and would fail at the listen as an unknown TCP service; a service name
// such as "http" would listen on a port nobody asked for by number.
func TestAddrPortMustBeANumber(t *testing.T) {
	for _, addr := range []string{"unix:/tmp/revenant.sock", "127.0.0.1:http", "127.0.0.1:65536", "127.0.0.1:-1"} {
		_, _, err := parseServe([]string{"-addr", addr, "-data", t.TempDir()}, env(nil), io.Discard)
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "is not host:port with a numeric port", addr)
		assert.Contains(t, err.Error(), "only TCP is served", addr)
	}
	_, _, err := parseServe([]string{"-addr", "127.0.0.1:0", "-data", t.TempDir()}, env(nil), io.Discard)
	require.NoError(t, err, "port 0: the system picks one")
}

// A listen address another process holds stops the server at start-up
// with the system's reason and where to choose another address.
func TestAddrInUseSaysWhereToChangeIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	err = serve(context.Background(), []string{"-data", data, "-addr", ln.Addr().String()}, env(nil), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "address already in use")
	assert.Contains(t, err.Error(), "(set REVENANT_ADDR or -addr)")
	assert.NoDirExists(t, data, "nothing is created before the server can listen")
}

// An empty first argument is not a command: serve takes it, and refuses
// it as an argument it does not expect, rather than failing on it.
func TestEmptyArgumentIsAUsageError(t *testing.T) {
	var err error
	require.NotPanics(t, func() { err = run(context.Background(), []string{""}, io.Discard) })
	require.ErrorIs(t, err, errUsage)
	assert.Contains(t, err.Error(), `unexpected argument ""`)
}

// -help, as -h and --help, prints the commands, not only serve's flags.
func TestDashHelpPrintsTheCommands(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"-help"}, &out))
	for _, c := range []string{"simulate", "version", "help", "-addr"} {
		assert.Contains(t, out.String(), c)
	}
}

// version prints the build's version.
func TestVersionPrintsTheVersion(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"version"}, &out))
	assert.Equal(t, "revenant "+version+"\n", out.String())
}

// Without flags or variables the server listens on the default address
// and keeps its trees in ./data, logging at info; -debug logs at debug.
func TestServeDefaults(t *testing.T) {
	c, done, err := parseServe(nil, env(nil), io.Discard)
	require.NoError(t, err)
	require.False(t, done)
	assert.Equal(t, defaultAddr, c.addr)
	assert.Equal(t, defaultData, c.data)
	assert.Equal(t, defaultWordDelay, c.wordDelay)
	assert.Equal(t, slog.LevelInfo, c.logLevel)

	c, _, err = parseServe([]string{"-debug"}, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, slog.LevelDebug, c.logLevel)
}

// Only addresses this machine alone can reach count as loopback: an
// anonymous server may listen there and nowhere else.
func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8787": true, "127.1.2.3:80": true, "[::1]:8787": true, "localhost:8787": true,
		"LOCALHOST:8080": true, "LocalHost:8787": true, // host names are case-insensitive
		"localhost.example:8787": false, "xlocalhost:8787": false,
		"0.0.0.0:8787": false, ":8787": false, "[::]:8787": false, "192.0.2.1:8787": false,
		"example.com:8787": false, "nonsense": false,
	} {
		assert.Equal(t, want, loopbackOnly(addr), addr)
	}
}

// Without REVENANT_TOKENS the server refuses to listen anywhere but
// loopback, naming the variable, before it creates anything.
func TestAnonymousServerRefusesANonLoopbackAddress(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	// 192.0.2.1 is a documentation address: were the address accepted,
	// the listen would fail for another reason, not open a port.
	err := serve(context.Background(), []string{"-data", data, "-addr", "192.0.2.1:8787"}, env(nil), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "REVENANT_TOKENS is not set")
	assert.Contains(t, err.Error(), "may only listen on loopback")
	assert.NoDirExists(t, data)
}

// The API answers only requests addressed to loopback when there are no
// tokens (DNS rebinding), and any host once tokens authenticate callers.
func TestAPIConfigIsLoopbackOnlyWithoutTokens(t *testing.T) {
	base := api.NewConfig()
	got, err := apiConfig(serveConfig{}, base)
	require.NoError(t, err)
	assert.Equal(t, base.WithAllowedOrigins().WithLoopbackOnly(true), got)
	got, err = apiConfig(serveConfig{tokens: "alice:secret-token-1234"}, base)
	require.NoError(t, err)
	assert.Equal(t, base.WithAllowedOrigins().WithLoopbackOnly(false), got)
	assert.NotEqual(t, base.WithAllowedOrigins().WithLoopbackOnly(true), got, "the two differ: the check above can fail")
}

// The provider's URL is logged without the credentials it may carry.
func TestRedactURLHidesThePassword(t *testing.T) {
	got := redactURL("https://user:hunter2@llm.example/v1")
	assert.NotContains(t, got, "hunter2")
	assert.Contains(t, got, "llm.example/v1")
	assert.Equal(t, "(unparsable URL)", redactURL("http://[::1"))
}

// Bad SEED, SESSIONS or KILLS values are command-line mistakes (exit 2),
// found before any simulation starts.
func TestSimulateBadEnvironmentIsAUsageError(t *testing.T) {
	for _, name := range []string{"SEED", "SESSIONS", "KILLS"} {
		err := simulate(context.Background(), nil, env(map[string]string{name: "many"}), io.Discard)
		require.ErrorIs(t, err, errUsage, name)
		assert.Contains(t, err.Error(), name+`="many" is not a number`)
	}
}

// -check judges kept trees; one kept without a ledger is judged against
// an empty ledger, not refused.
func TestSimulateCheckWithoutALedger(t *testing.T) {
	dir := t.TempDir()
	db, err := sqlitedb.Open(filepath.Join(dir, "t1.db"), sqlitedb.Options{})
	require.NoError(t, err)
	require.NoError(t, schema.Migrate(context.Background(), db, 1))
	require.NoError(t, db.Close())
	var out strings.Builder
	require.NoError(t, simulate(context.Background(), []string{"-check", dir}, env(nil), &out))
	assert.Contains(t, out.String(), "t1.db: 0 sessions")
	assert.True(t, strings.HasSuffix(out.String(), "violations: 0\n"), out.String())
}

// The data directory a server creates is its owner's alone: it holds
// every tree's sessions.
func TestDataDirectoryIsCreatedPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	release, err := lockDataDir(dir)
	require.NoError(t, err)
	defer release()
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())
}
