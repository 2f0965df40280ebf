package archtest_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/revenantrt/revenant"

// platform is what only hosts may reach: the browser/Workers bridge, the
// wazero runtime, SQLite and the Workers bindings (DESIGN §3).
var platform = []string{
	"syscall/js",
	"github.com/tetratelabs/wazero/...",
	"github.com/ncruces/...",
	"github.com/syumai/...",
}

// rule constrains what the packages matched by from depend on, directly
// or through others. Patterns are module-relative ("core/..." is core and
// everything below it), or full import paths for other modules and the
// standard library.
type rule struct {
	from   string
	except []string // packages of from the rule does not apply to
	// only, if set, lists the module packages they may depend on.
	only []string
	// never lists packages they must not depend on. syscall/js counts only
	// when a package outside the standard library imports it: on js/wasm
	// the standard library reaches it itself.
	never []string
	// tests: the imports of the package's test files count too (and are
	// the point, for a package of tests). Otherwise tests are free: a test
	// of host may run the wazero backend, say.
	tests bool
	// future: from may match no package yet.
	future bool
	// goos, if set, is the one target the rule is checked on (with wasm):
	// the guest's package builds for wasip1 alone.
	goos string
	why  string
}

// rules is the architecture. Keep each reason short and true.
var rules = []rule{
	{from: "core/...", only: []string{"core/..."}, never: platform,
		why: "core is the innermost layer and platform-free: it builds for linux/amd64, js/wasm and wasip1/wasm and imports no host package"},
	// The exceptions: the adapter itself and the conformance suites
	// (testify imports net/http; no binary links them).
	{from: "core/...", except: []string{"core/httpmsg/nethttp", "core/hosttest", "core/storage/storagetest"}, never: []string{"net/http"},
		why: "the wasm guest and the Durable Object link core, and net/http costs them ~520 KB of gzip: core speaks core/httpmsg, and hosts that have net/http adapt it with httpmsg/nethttp"},
	{from: "recovery/...", only: []string{"core/...", "recovery/..."}, never: platform,
		why: "recovery is policy over core: adapters → recovery → core, never back"},
	{from: "sqlitedb/...", only: []string{"core/storage"},
		why: "sqlitedb is a leaf: host/ and wasm/ both use it, so it can tie neither to the other"},
	{from: "tools/...", only: []string{"core/...", "tools/..."},
		why: "the tools implement core's tool contract for every host; no host may be reached from them"},
	{from: "tools/web", never: []string{"net/http", "net"},
		why: "the web tools speak core/httpmsg and net/netip; only tools/web/webnet, for hosts with sockets, links net/http's client and TLS and package net's dialer, resolver and interface list (~200 KB of gzip in the wasm guest)"},
	{from: "tools/web/httpargs", only: []string{"core/httpmsg"}, never: []string{"crypto/...", "net/http", "net"},
		why: "the wasm guest parses http_request's arguments with it alone: it must stay free of the signing, address rules and sockets of tools/web"},
	{from: "wasm/guest", goos: "wasip1", never: []string{"tools/web", "tools/web/webnet", "crypto/hmac", "crypto/sha256", "crypto/internal/fips140", "net/http", "net", "log/slog", "log", "mime"},
		why: "every package in the guest's 1.5 MiB is paid for at each boot (docs/RATIONALE.md, \"A lean guest\"): the guest declares tools and its host sends their requests (tools/web's webhook signing links crypto's FIPS module: AES, SHA-3, SHA-512, a DRBG, ~54 KB of gzip; net/http ~520 KB; it needs only tools/web/httpargs), core hashes with core/digest, logs through core/logs (log/slog ~56 KB) and reads a media type without mime (~26 KB)"},
	{from: "core/model/...", never: []string{"net/http"},
		why: "the model providers run in the wasm guest and the Durable Object, whose egress is the host's: net/http would only add weight"},
	{from: "cmd/worker", goos: "js", never: []string{"net/http", "net", "mime", "regexp", "log/slog", "log"},
		why: "the Cloudflare Worker's one wasm module (the front and the Tree objects) must fit the free plan's 3 MB and starts on every new object: net/http adds ~410 KB of gzip; regexp ~114 KB, and a package-level regexp compiles at every Go start (about 30 ms of a fresh isolate's first start); log/slog and package log ~43 KB (core/logs writes slog's lines without them)"},
	{from: "config/...", only: []string{"core/...", "tools/...", "config/..."},
		why: "REVENANT_CONFIG is parsed into core's and the tools' types, for any host"},
	{from: "host/...", never: []string{"wasm/...", "cmd/...", "durableobject/...", "worker/..."},
		why: "host and wasm never import each other both ways: host defines GuestRuntime, cmd/revenant wires in wasm/backend"},
	{from: "wasm/...", except: []string{"wasm/backend"}, never: []string{"host/...", "cmd/...", "durableobject/...", "worker/..."},
		why: "of wasm/, only wasm/backend (host.GuestRuntime on wazero) imports host; the runtime, guest and simulator stand alone"},
	{from: "durableobject/...", never: []string{"host/...", "wasm/...", "cmd/...", "worker/..."}, future: true,
		why: "the Durable Object host is an adapter of its own: adapters → recovery → core"},
	{from: "worker/...", never: []string{"host/...", "wasm/...", "cmd/...", "durableobject/..."}, future: true,
		why: "the front Worker is an adapter of its own: adapters → recovery → core"},
	{from: "internal/...", never: []string{"cmd/...", "e2e/..."},
		why: "test harnesses serve the packages they test; the server and e2e are not harnesses"},
	{from: "e2e/...", only: []string{"internal/guestbuild", "internal/redirecthost"}, tests: true,
		why: "e2e is black-box: it builds the server and the guest and talks HTTP; only the guest build helper and a test HTTP server are shared"},
}

// pkg is one package of a go list run.
type pkg struct {
	standard bool
	imports  []string
	tests    []string // imports of its test files (internal and external)
}

// graph lists every package of the module and everything they depend on,
// for one target ("" is the default one).
func graph(t *testing.T, goos, goarch string) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps",
		"-f", `{{.ImportPath}}|{{.Standard}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`,
		module+"/...")
	cmd.Env = os.Environ()
	if goos != "" {
		cmd.Env = append(cmd.Env, "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	g := map[string]pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		require.Len(t, f, 4, "unexpected go list line %q", sc.Text())
		g[f[0]] = pkg{standard: f[1] == "true", imports: strings.Fields(f[2]), tests: strings.Fields(f[3])}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, g, "go list printed nothing")
	return g
}

// match reports whether import path p matches pattern pat.
func match(pat, p string) bool {
	if first, _, _ := strings.Cut(pat, "/"); !strings.Contains(first, ".") && !isStd(pat) {
		pat = module + "/" + pat
	}
	if dir, ok := strings.CutSuffix(pat, "/..."); ok {
		return p == dir || strings.HasPrefix(p, dir+"/")
	}
	return p == pat
}

// isStd reports whether a pattern names a standard library package (the
// rules name syscall/js, net, net/http, crypto's, log, log/slog, mime and regexp).
func isStd(pat string) bool {
	switch pat {
	case "net", "log", "mime", "regexp":
		return true
	}
	for _, prefix := range []string{"syscall/", "net/", "crypto/", "log/"} {
		if strings.HasPrefix(pat, prefix) {
			return true
		}
	}
	return false
}

func matchAny(pats []string, p string) bool {
	return slices.ContainsFunc(pats, func(pat string) bool { return match(pat, p) })
}

// reach walks from root's imports (and its tests', with tests) and returns
// every package reached, each with the one that imported it first.
func reach(g map[string]pkg, root string, tests bool) map[string]string {
	via := map[string]string{}
	queue := slices.Clone(g[root].imports)
	if tests {
		queue = append(queue, g[root].tests...)
	}
	for _, p := range queue {
		if p != root {
			via[p] = root
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == root {
			continue
		}
		for _, q := range g[p].imports {
			if _, seen := via[q]; !seen && q != root {
				via[q] = p
				queue = append(queue, q)
			}
		}
	}
	return via
}

// chain is how root reaches p: root → … → p.
func chain(via map[string]string, root, p string) string {
	path := []string{short(p)}
	for p != root {
		p = via[p]
		path = append(path, short(p))
	}
	slices.Reverse(path)
	return strings.Join(path, " → ")
}

func short(p string) string {
	if rest, ok := strings.CutPrefix(p, module+"/"); ok {
		return rest
	}
	return p
}

// check returns the violations of r by package root.
func check(g map[string]pkg, r rule, root string) []string {
	via := reach(g, root, r.tests)
	var bad []string
	allowed := func(p string) bool { return !strings.HasPrefix(p, module+"/") || matchAny(r.only, p) }
	for p, by := range via {
		// Where the graph leaves the allowed packages, not all it reaches
		// beyond.
		if r.only != nil && !allowed(p) && (by == root || allowed(by)) {
			bad = append(bad, chain(via, root, p))
		}
	}
	// A forbidden package counts where the graph enters it, from a package
	// outside the standard library (see rule.never).
	from := append([]string{root}, mapsKeys(via)...)
	for _, p := range from {
		if g[p].standard || matchAny(r.never, p) {
			continue
		}
		for _, q := range g[p].imports {
			if matchAny(r.never, q) {
				bad = append(bad, chain(via, root, p)+" → "+short(q))
			}
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

func mapsKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestArchitecture checks every rule on every module package it applies to,
// for each target the code builds for. Test files are exempt, except where
// a rule says otherwise.
func TestArchitecture(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list three times")
	}
	for _, target := range []struct{ goos, goarch string }{
		{"", ""}, // the default target
		{"js", "wasm"},
		{"wasip1", "wasm"},
	} {
		name := target.goos + "/" + target.goarch
		if target.goos == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			g := graph(t, target.goos, target.goarch)
			for _, r := range rules {
				if r.goos != "" && r.goos != target.goos {
					continue
				}
				matched := 0
				for p := range g {
					if !strings.HasPrefix(p, module+"/") || !match(r.from, p) || matchAny(r.except, p) {
						continue
					}
					matched++
					for _, v := range check(g, r, p) {
						t.Errorf("%s: forbidden dependency %s\n\trule %s: %s", name, v, r.from, r.why)
					}
				}
				if matched == 0 && !r.future && target.goos == r.goos {
					t.Errorf("rule %s matches no package: update the table", r.from)
				}
			}
		})
	}
}
