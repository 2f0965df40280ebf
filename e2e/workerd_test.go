package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Durable Object host under local workerd (wrangler dev), killed with
// SIGKILL like the local server. Skipped where node or the pinned wrangler
// (npm ci) is missing. Each test owns its wrangler (port, state and
// TMPDIR) and only reads the run's Worker builds (buildObject), so the
// workerd tests run in parallel (t.Parallel: at most -parallel at once,
// GOMAXPROCS by default, after the local server's tests): one test's
// waits (alarms, paced streams, sleeps) overlap another's work. Within a
// test, kills and restarts come one after another. The three tests whose
// kills are the acceptance campaign (TestWorkerdSIGKILL,
// TestWorkerdToolTurnKills, TestWorkerdWebhookLedger: at least 12 kills of
// tool-calling turns a run, serially) are not parallel: Go runs them
// alone, one after another, before the parallel ones.

// workerd is one `wrangler dev` process group serving on a loopback port,
// with its state under a directory that survives restarts.
type workerd struct {
	root   string // the module root
	config string // a wrangler.toml without the [build] step
	state  string // --persist-to
	tmp    string // TMPDIR: wrangler's and workerd's scratch files, removed with the test
	port   int
	vars   []string          // --var NAME:value
	tap    func(line string) // when set, hears every output line as it arrives (benchmarks)

	cmd  *exec.Cmd
	logs *logBuffer
	done chan struct{} // closed when the group leader was reaped
}

// workerdWordDelay paces the offline model so a kill can land mid-stream.
const workerdWordDelay = "30ms"

func requireWrangler(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("workerd e2e: skipped with -short")
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	root := filepath.Dir(wd)
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("workerd e2e: no node on PATH")
	}
	if _, err := os.Stat(wranglerBin(root)); err != nil {
		t.Skip("workerd e2e: no node_modules/.bin/wrangler (run npm ci)")
	}
	return root
}

// wranglerBin is the pinned wrangler npm ci installed. It is run directly,
// not through npx: npx's own start (about 0.3 s here, resolving the
// package) would count in every start, the recovery benchmark's included.
func wranglerBin(root string) string {
	return filepath.Join(root, "node_modules", ".bin", "wrangler")
}

// objects are the Worker builds of this run, one per set of build tags
// (buildObject), under a directory runMain removes at the end.
var objects = struct {
	sync.Mutex
	dir   string
	entry map[string]string // by tags: the entry module's path
}{entry: map[string]string{}}

// removeObjects removes the run's Worker builds.
func removeObjects() {
	objects.Lock()
	defer objects.Unlock()
	if objects.dir != "" {
		os.RemoveAll(objects.dir)
	}
}

// buildObject does what `make do-build` does (wrangler.toml's [build]),
// once per run for each tags, so neither restarts nor later tests
// rebuild, into a tree of its own: a copy of the Worker's JS modules
// (worker/*.mjs, durableobject/*.js and *.mjs) beside build/, where make
// puts the Worker's one wasm program (cmd/worker: the front and the Tree
// objects), built with tags (the test routes' build:
// revenant_testroutes). The project's build/ is left alone, and nothing
// writes to the tree once built (wrangler's own files go beside the
// test's config). It returns the entry module's path.
func buildObject(t *testing.T, root, tags string) string {
	t.Helper()
	objects.Lock()
	defer objects.Unlock()
	if main, ok := objects.entry[tags]; ok {
		return main
	}
	if objects.dir == "" {
		d, err := os.MkdirTemp("", "revenant-e2e-worker-")
		require.NoError(t, err)
		objects.dir = d
	}
	dir, err := os.MkdirTemp(objects.dir, "tags-")
	require.NoError(t, err)
	var modules []string
	for _, pattern := range []string{"worker/*.mjs", "durableobject/*.js", "durableobject/*.mjs"} {
		found, err := filepath.Glob(filepath.Join(root, pattern))
		require.NoError(t, err)
		for _, f := range found {
			rel, err := filepath.Rel(root, f)
			require.NoError(t, err)
			modules = append(modules, rel)
		}
	}
	require.Contains(t, modules, filepath.Join("worker", "entry.mjs"))
	for _, f := range modules {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	cmd := exec.Command("make", "-s", "do-build", "BUILD="+filepath.Join(dir, "build"), "DO_TAGS="+tags)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make do-build: %s", out)
	main := filepath.Join(dir, "worker", "entry.mjs")
	objects.entry[tags] = main
	return main
}

// testConfig writes the project's wrangler.toml without its [build] table
// (wrangler runs it at every start) and with main the given entry module.
func testConfig(t *testing.T, root, main string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "wrangler.toml"))
	require.NoError(t, err)
	var out []string
	inBuild := false
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") {
			inBuild = trimmed == "[build]"
		}
		if inBuild {
			continue
		}
		if strings.HasPrefix(trimmed, "main = ") {
			line = "main = " + strconv.Quote(main)
		}
		out = append(out, line)
	}
	path := filepath.Join(t.TempDir(), "wrangler.toml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644))
	return path
}

// ports are the wranglers' ports handed out this run (freePort).
var ports = struct {
	sync.Mutex
	given     map[int]bool
	low, high int // the range freePort picks from; empty: the kernel picks
	next      int
}{}

// freePort picks a loopback port for a wrangler, which keeps it across
// restarts: from a kill to the next start nothing holds it. The workerd
// tests run in parallel, and a port the kernel hands out by itself (an
// outgoing connection's, a port-0 listener's: wrangler's and workerd's
// own) could go to another test's wrangler in that gap; so the port is
// taken below the kernel's ephemeral range, where nothing is handed out
// unasked, from a random place, once a run. Where that range cannot be
// read, the kernel picks, as before.
func freePort(t *testing.T) int {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
		if low := ephemeralLow(); low >= 2048 {
			ports.low, ports.high = max(1024, low-8192), low
			ports.next = ports.low + rand.IntN(ports.high-ports.low)
		}
	}
	for range ports.high - ports.low {
		p := ports.next
		if ports.next++; ports.next == ports.high {
			ports.next = ports.low
		}
		if ports.given[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // in use
		}
		require.NoError(t, l.Close())
		ports.given[p] = true
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux),
// or 0 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}

// wranglerEnv is the environment wrangler runs in: offline (no banner:
// printing it asks the npm registry for a newer wrangler, and each test's
// fresh TMPDIR has no cached answer), no metrics, no colour, and its
// scratch files under tmp (miniflare leaves a directory in TMPDIR per
// start that a SIGKILL never removes; under the test's own directory they
// go with it).
func wranglerEnv(tmp string) []string {
	return append(os.Environ(), "CLOUDFLARE_CF_FETCH_ENABLED=false", "WRANGLER_SEND_METRICS=false",
		"WRANGLER_SEND_ERROR_REPORTS=false", "WRANGLER_HIDE_BANNER=true", "CI=1", "NO_COLOR=1", "TMPDIR="+tmp)
}

func startWorkerd(t *testing.T) *workerd {
	return startWorkerdWith(t, "", "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
}

// startWorkerdWith starts wrangler dev on the object built with tags and
// with vars (NAME:value) set.
func startWorkerdWith(t *testing.T, tags string, vars ...string) *workerd {
	t.Helper()
	return startWorkerdTOML(t, tags, "", vars...)
}

// startWorkerdTOML is startWorkerdWith with tomlVars (lines such as
// `NAME = { key = 1 }`) added to the config's [vars] table, its last: a
// var given as a TOML table reaches the Worker as an object, which --var
// cannot give. A table of its own may follow them (selfService).
func startWorkerdTOML(t *testing.T, tags, tomlVars string, vars ...string) *workerd {
	t.Helper()
	root := requireWrangler(t)
	main := buildObject(t, root, tags)
	config := testConfig(t, root, main)
	if tomlVars != "" {
		b, err := os.ReadFile(config)
		require.NoError(t, err)
		last := strings.LastIndex(string(b), "\n[")
		require.True(t, strings.HasPrefix(string(b[last+1:]), "[vars]"), "wrangler.toml ends with its [vars] table")
		require.NoError(t, os.WriteFile(config, append(b, []byte("\n"+tomlVars+"\n")...), 0o644))
	}
	w := &workerd{root: root, config: config, state: t.TempDir(), tmp: t.TempDir(), port: freePort(t), vars: vars}
	t.Cleanup(func() {
		w.kill(t)
		if t.Failed() && w.logs != nil {
			t.Logf("wrangler's output since its last start:\n%s", w.logs.tail(200))
		}
	})
	w.start(t)
	return w
}

// start runs wrangler dev in its own process group (setsid), offline and
// on loopback (PLATFORM.md), and returns once it reported ready.
func (w *workerd) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(wranglerBin(w.root), "dev", "-c", w.config, "--ip", "127.0.0.1", "--port", strconv.Itoa(w.port),
		"--inspector-port", "0", "--persist-to", w.state, "--show-interactive-dev-session=false")
	for _, v := range w.vars {
		cmd.Args = append(cmd.Args, "--var", v)
	}
	cmd.Dir = w.root
	if w.tmp == "" {
		w.tmp = t.TempDir() // kept for restarts: the scratch files go with the test
	}
	cmd.Env = wranglerEnv(w.tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	trackGroup(cmd.Process.Pid)
	w.cmd, w.done, w.logs = cmd, make(chan struct{}), &logBuffer{} // this run's output only
	logs, done, tap := w.logs, w.done, w.tap
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				logs.add(line)
				if tap != nil {
					tap(line)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-lines // the pipe's EOF first: Wait closes it
		_ = cmd.Wait()
		close(done)
	}()
	w.waitLog(t, "Ready on http://127.0.0.1:"+strconv.Itoa(w.port), time.Minute)
}

// waitLog waits until wrangler's output of this run (the objects' logs
// included) holds text; it fails the test past limit or if wrangler exited.
func (w *workerd) waitLog(t *testing.T, text string, limit time.Duration) {
	t.Helper()
	w.waitOutput(t, limit, func(out string) (bool, string) {
		return strings.Contains(out, text), strconv.Quote(text)
	})
}

// waitLogTimes is waitLog for text seen n times in this run's output.
func (w *workerd) waitLogTimes(t *testing.T, text string, n int, limit time.Duration) {
	t.Helper()
	w.waitOutput(t, limit, func(out string) (bool, string) {
		seen := strings.Count(out, text)
		return seen >= n, fmt.Sprintf("%q %d times (seen %d)", text, n, seen)
	})
}

// waitOutput is the loop of waitLog, waitLogTimes and waitFirstLog: it
// runs check on wrangler's output of this run at every new line until
// check reports done, and fails the test past limit or if wrangler exited
// first, with check's description of what is still missing.
func (w *workerd) waitOutput(t *testing.T, limit time.Duration, check func(out string) (done bool, missing string)) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		out, changed := w.logs.watch()
		done, missing := check(out)
		if done {
			return
		}
		select {
		case <-changed:
		case <-w.done:
			// Every line was read before done closed (start): one last look.
			if done, missing = check(w.logs.String()); !done {
				t.Fatalf("wrangler exited before %s:\n%s", missing, w.logs)
			}
			return
		case <-deadline.C:
			t.Fatalf("no %s within %v:\n%s", missing, limit, w.logs)
		}
	}
}

// kill SIGKILLs the whole process group (wrangler, its cli, esbuild and
// both workerd processes) and waits until none of it is left. Only the
// group this test started.
func (w *workerd) kill(t *testing.T) {
	if w.cmd == nil {
		return
	}
	pgid := w.cmd.Process.Pid
	w.cmd = nil
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-w.done
	// The other members were killed with the leader; wait for the kernel
	// to finish them so the port and the state files are free (a member
	// left unreaped holds neither: groupRunning).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for groupRunning(pgid) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Errorf("process group %d still alive 10 s after SIGKILL", pgid)
			return
		}
	}
	untrackGroup(pgid)
}

// restart is a SIGKILL of the whole group and a start on the same state.
func (w *workerd) restart(t *testing.T) {
	t.Helper()
	w.kill(t)
	kills.Add(1)
	w.start(t)
}

// resumedByAlarm waits, with no client request, until the object of
// tree sid was woken by its alarm, its boot resumed the turn, and the
// alarm handler saw the turn end (it holds while turns run).
func (w *workerd) resumedByAlarm(t *testing.T, sid string) {
	t.Helper()
	w.waitLog(t, `msg="tree booted" tree=`+sid+` resumed=1`, 30*time.Second)
	w.waitLog(t, `msg="alarm handled" tree=`+sid+` idle=true`, 30*time.Second)
}

// alarmReturned starts the line the tests' build logs as an alarm
// handler returns (shim.js), its tree id after it: workerd retries only a
// handler that throws, so one that returned used its alarm up.
const alarmReturned = "revenant test: the alarm handler returned: "

// requireAlarmRetried waits, after a test made an alarm handler of tree
// sid fail (a panic, the Go program's end), for the object to give itself
// up so that workerd retries the alarm on a fresh object: in wrangler's
// output past from (logLen), tree sid boots before any of its alarm
// handlers returns. The failed handler's return comes first if the
// object kept it (the alarm used up, nothing re-armed), and fails the test
// at once rather than at the limit of a wait for a retry that never comes.
func (w *workerd) requireAlarmRetried(t *testing.T, sid string, from int) {
	t.Helper()
	booted := `msg="tree booted" tree=` + sid
	first := w.waitFirstLog(t, from, 30*time.Second, booted, alarmReturned+sid)
	require.Equal(t, booted, first, "the failed alarm handler returned, its alarm used up, instead of giving its object up for a fresh one to retry it")
}

// logLen is the length of wrangler's output of this run so far: a mark
// for waitFirstLog.
func (w *workerd) logLen() int { return len(w.logs.String()) }

// waitFirstLog waits until wrangler's output of this run past from holds
// one of texts and returns the one that comes first there; it fails the
// test past limit or if wrangler exited.
func (w *workerd) waitFirstLog(t *testing.T, from int, limit time.Duration, texts ...string) string {
	t.Helper()
	var first string
	w.waitOutput(t, limit, func(out string) (bool, string) {
		out = out[from:]
		at := len(out)
		for _, text := range texts {
			if i := strings.Index(out, text); i >= 0 && i < at {
				first, at = text, i
			}
		}
		return first != "", fmt.Sprintf("any of %q", texts)
	})
	return first
}

func (w *workerd) client(t *testing.T) *server {
	return &server{t: t, url: "http://127.0.0.1:" + strconv.Itoa(w.port), client: &http.Client{Transport: w.transport(nil)}}
}

// nudging is the transport of w's test clients: while a GET or HEAD
// waits for its answer's headers, it sends GET /healthz to w every second,
// each on a new connection. After an object's answer failed mid-body (a
// panic in an event stream, an object given up), wrangler dev's proxy
// (wrangler 4.86.0, ProxyWorker.js) may meet a broken connection to the
// Worker, and it puts a GET or HEAD whose forward failed in a retry queue
// that it works through only on its next request or a reload: its test of
// "the Worker did not restart" compares the request's URL with the
// Worker's base URL, which differ for any path but /. (Any other method
// gets its 503 "Your worker restarted mid-request" at once, which
// sendAgainOnProxyRestart sends again.) Such a GET
// never reaches the Worker until then: in 280 rounds of a panic in an
// answered stream, 7 snapshots after it went unanswered for 3 s, and each
// was answered as soon as one GET /healthz reached the proxy. Cloudflare
// has no such proxy; the nudges reach no object.
type nudging struct {
	base http.RoundTripper
	port int
}

func (n nudging) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return n.sendAgainOnProxyRestart(r)
	}
	answered := make(chan struct{})
	defer close(answered)
	go func() {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-answered:
				return
			case <-tick.C:
			}
			if resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(n.port) + "/healthz"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	return n.base.RoundTrip(r)
}

// proxyRestarted starts the answer wrangler dev's proxy gives a request
// other than GET or HEAD whose forward to the Worker failed (nudging).
const proxyRestarted = "Your worker restarted mid-request."

// sendAgainOnProxyRestart sends r (not a GET or HEAD) and, if wrangler
// dev's proxy answers its own 503 "Your worker restarted mid-request",
// sends it once more, saying so on stderr. That answer comes when the
// proxy's forward met a connection to the Worker that an earlier failed
// answer (an event stream an object's abort cut) left broken: the request
// did not reach the Worker, and nothing on Cloudflare answers so. (The
// proxy gives it for any failed forward, so that is what was seen, not
// what it promises: a resend that did reach the Worker would be a double,
// which the tests that count writes, requireTakenOnce, fail on; the line
// on stderr names every resend for the rest.)
func (n nudging) sendAgainOnProxyRestart(r *http.Request) (*http.Response, error) {
	resp, err := n.base.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(resp.Header.Get("Content-Type"), "json") {
		return resp, err
	}
	head := make([]byte, len(proxyRestarted))
	k, err := io.ReadFull(resp.Body, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		resp.Body.Close()
		return nil, err
	}
	if string(head[:k]) != proxyRestarted || (r.Body != nil && r.GetBody == nil) {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head[:k]), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	fmt.Fprintf(os.Stderr, "e2e: wrangler dev's proxy answered %s %s itself (%q); sending it once more\n", r.Method, r.URL.Path, proxyRestarted)
	again := r.Clone(r.Context())
	if r.GetBody != nil {
		if again.Body, err = r.GetBody(); err != nil {
			return nil, err
		}
	}
	return n.base.RoundTrip(again)
}

// transport is base (nil: http.DefaultTransport) for a client of w: nudging.
func (w *workerd) transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return nudging{base: base, port: w.port}
}

// TestWorkerdSIGKILL kills wrangler dev's whole process group at points of
// a turn, restarts it on the same state and, with no client request,
// checks that the object's alarm finished the turn exactly once and that
// nothing done before the kill was done again, and that nothing the user
// interrupted before the kill, sub-agents included, ran again.
// WORKERD_KILL_ROUNDS repeats the scenarios (make e2e-workerd: 3 rounds,
// 18 kills).
func TestWorkerdSIGKILL(t *testing.T) {
	// Not parallel (see workerd_test.go): the acceptance campaign's kills.
	w := startWorkerd(t)
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("WORKERD_KILL_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	scenarios := []struct {
		name string
		run  func(*testing.T, *workerd)
	}{
		{"sleeping step", workerdKillSleeping},
		{"mid stream", workerdKillMidStream},
		{"after a tool call", workerdKillAfterTool},
		{"after an interrupt", workerdKillAfterInterrupt},
		{"after an interrupt that stopped a grandchild", workerdKillAfterGrandchildInterrupt},
		{"after the object's first alarm", workerdKillAfterAnAlarm},
	}
	for r := range rounds {
		for _, sc := range scenarios {
			if !t.Run(fmt.Sprintf("%s/%d", sc.name, r), func(t *testing.T) { sc.run(t, w) }) {
				return // the server may be in any state
			}
		}
	}
}

// workerdKillAfterAnAlarm: killed in a later turn of an object whose
// alarm has already fired once. A delivered alarm is used up: the next
// claim must set a new one, or nothing wakes the object after the kill
// (every other scenario kills before a tree's first alarm).
func workerdKillAfterAnAlarm(t *testing.T, w *workerd) {
	s := w.client(t)
	sid := s.create()
	first := s.prompt(sid, "before the alarm")
	s.settle(sid, first).requireEnd(t, first, typeSucceeded, "")
	w.waitLog(t, `msg="alarm handled" tree=`+sid+` idle=true resumed=`, 30*time.Second)

	st := s.follow(sid, 0)
	a := s.prompt(sid, "/sleep 2s\nafter the alarm")
	st.until("the sleeping step", forPrompt(typeStepStarted, a))
	st.close()
	w.restart(t)
	w.resumedByAlarm(t, sid)

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1, "resumed once, by the alarm:%s", describe(sum.log))
}

// workerdKillSleeping: killed while the model sleeps before answering.
func workerdKillSleeping(t *testing.T, w *workerd) {
	s := w.client(t)
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/sleep 2s\nI survive restarts.")
	st.until("the sleeping step", forPrompt(typeStepStarted, a))
	st.close()

	restarted := time.Now()
	w.restart(t)
	w.resumedByAlarm(t, sid)
	t.Logf("restart → turn completed by the alarm: %v", time.Since(restarted))

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1, "resumed once, by the alarm:%s", describe(sum.log))
	require.Len(t, ta.done, 1)
	require.Equal(t, "You said: I survive restarts.", ta.done[0].P.Text)
}

// workerdKillMidStream: killed after three words of the answer streamed.
// The resumed turn answers in full; the killed step is marked cut.
func workerdKillMidStream(t *testing.T, w *workerd) {
	text := "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
	s := w.client(t)
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, text)
	st.until("three text deltas", nDeltas(3))
	st.close()

	w.restart(t)
	w.resumedByAlarm(t, sid)

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1, "resumed once:%s", describe(sum.log))
	require.Len(t, ta.done, 1, "one completed step: the cut one is not completed")
	require.Equal(t, "You said: "+text, ta.done[0].P.Text)
	cut := false
	for _, e := range sum.log {
		cut = cut || (e.Type == typeStepCut && e.P.StepID == ta.steps[0].P.StepID)
	}
	require.True(t, cut, "the killed step is marked cut; log:%s", describe(sum.log))
}

// workerdKillAfterTool: killed in the step after a settled tool call. The
// resumed turn does not call the tool again.
func workerdKillAfterTool(t *testing.T, w *workerd) {
	s := w.client(t)
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/tool kv_put {\"key\": \"colour\", \"value\": \"green\"}\n/sleep 2s\nafter the tool")
	st.until("the tool's settlement", isType(typeToolSettled))
	st.until("the next step", forPrompt(typeStepStarted, a))
	st.close()

	w.restart(t)
	w.resumedByAlarm(t, sid)

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1, "resumed once:%s", describe(sum.log))
	settled := 0
	for _, e := range sum.log {
		if e.Type == typeToolSettled {
			settled++
		}
	}
	require.Equal(t, 1, settled, "the tool ran once:%s", describe(sum.log))
	last := ta.done[len(ta.done)-1]
	require.Equal(t, "Tool kv_put returned: stored colour\nYou said: after the tool", last.P.Text)
}

// workerdKillAfterInterrupt: a turn the user interrupted before the kill
// never resumes. Nothing is owed, so nothing wakes the object: the check
// itself boots it.
func workerdKillAfterInterrupt(t *testing.T, w *workerd) {
	s := w.client(t)
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/sleep 30s\nnever answered")
	st.until("the sleeping step", forPrompt(typeStepStarted, a))
	require.True(t, s.interrupt(sid))
	st.until("the interrupt", forPrompt(typeInterrupted, a))
	st.close()

	w.restart(t)

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeInterrupted, "user")
	require.Empty(t, ta.resumes, "an interrupted turn never resumes:%s", describe(sum.log))
	require.Len(t, ta.starts, 1)
}

// workerdKillAfterGrandchildInterrupt: a root waits on a child that waits
// on a grandchild streaming its answer, all in the tree's one object. The
// root's interrupt stops the grandchild before it answers 200; after a
// kill and a restart (the object woken by its alarm, if at all, with no
// client request but reads) nothing of the grandchild's task turn happens
// after its end.
func workerdKillAfterGrandchildInterrupt(t *testing.T, w *workerd) {
	s := w.client(t)
	g := interruptOverGrandchild(t, s)
	w.restart(t)
	g.requireStoppedForGood(t, s)
}

// An event stream whose client went away, then more events for it: under
// wrangler dev the disconnect does not reach the object, so its stream
// stays open with nowhere to go. Every later request is still answered,
// on that tree and elsewhere: a writer that kept asking such a stream
// whether it was ready once spun forever and stopped the whole isolate.
// And more streams than a tree serves at once (64) are opened this way:
// each new one ends the oldest, so the ones left behind never fill the
// tree's places.
func TestWorkerdStaleStreams(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "", "REVENANT_TOKENS:"+frontTokens, "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
	s := w.as(t, "a-token")
	sid, other := s.create(), s.create()
	for i := range 35 { // 70 streams on one tree
		for _, text := range []string{"read live, then left", "after the client left"} {
			p := s.prompt(sid, fmt.Sprintf("turn %d: %s", i, text))
			st := s.follow(sid, 0)
			st.until("the turn's end", endOf(p))
			st.close() // the client leaves; the object is not told
		}
		s.snapshot(other)
	}
}
