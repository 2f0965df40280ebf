package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWorkerdBench measures revenant's Durable Object host side by side
// with a plain JS Durable Object (testdata/plainjs) on the same local
// workerd: cold first request to a new tree, a warm prompt to its turn's
// end with a zero-delay model, and a SIGKILL mid-turn to the turn's end
// after the restart with no client request. It is a benchmark, not a
// test: it runs only with REVENANT_BENCH_WORKERD=1 (make bench-workerd)
// and prints p50/p90 of each figure. REVENANT_BENCH_SAMPLES sets the
// samples per figure (30; at least 20).
//
// What each figure times (wall clock in this process, loopback):
//   - cold: POST /v1/sessions through the front to a new object, answered
//     201 (the object is new: its first event); then the first GET of the
//     snapshot. Reported alone and as the sum.
//   - warm: on a session that already ran a turn, with its event stream
//     already open, from sending POST …/prompt to reading the turn's end
//     on that stream (revenant: session.execution.succeeded@1 of the
//     prompt on SSE; plain JS: its `done` event). Also the 202 alone.
//   - recovery: a turn streaming (the model paced at benchWordDelay a word)
//     is killed after its third word (SIGKILL of the whole wrangler process
//     group), then from the start command to the object's log line saying
//     the turn ended (revenant: `alarm handled tree=… idle=true`, after
//     `tree booted … resumed=1`; plain JS: `plainjs: turn done … cause=alarm`),
//     with no client request until that line; split into start → ready,
//     ready → the object's first line, and the rest. The answer is checked
//     after the line, by a request.
//
// Models: both objects call the same fake OpenAI-compatible server of
// this test over loopback fetch. With REVENANT_BENCH_REVENANT_MODEL=offline
// revenant runs the offline model in process instead, which answers the
// same text ("You said: " + prompt, word by word) with no network hop.
func TestWorkerdBench(t *testing.T) {
	if os.Getenv("REVENANT_BENCH_WORKERD") != "1" {
		t.Skip("a benchmark: REVENANT_BENCH_WORKERD=1 (make bench-workerd)")
	}
	root := requireWrangler(t)
	samples := 30
	if n, err := strconv.Atoi(os.Getenv("REVENANT_BENCH_SAMPLES")); err == nil {
		samples = n
	}
	require.Positive(t, samples)
	if samples < 20 {
		t.Logf("%d samples: a trial run; the figures need at least 20", samples)
	}
	model := newBenchModel()
	provider := httptest.NewServer(model)
	t.Cleanup(provider.Close)
	main := buildObject(t, root, "")

	only := os.Getenv("REVENANT_BENCH_ONLY") // a comma list of revenant, plainjs, profile, turnprofile; empty: the first two
	runs := func(name string) bool {
		if only == "" {
			return !strings.HasSuffix(name, "profile") || os.Getenv("REVENANT_BENCH_PROFILE") == "1"
		}
		return slices.Contains(strings.Split(only, ","), name)
	}
	var results []benchResult
	for _, target := range []benchTarget{
		revenantTarget(t, root, main, provider.URL+"/v1"),
		plainTarget(t, root, provider.URL+"/v1"),
	} {
		if !runs(target.key) {
			continue
		}
		t.Run(target.name, func(t *testing.T) {
			results = append(results, runTarget(t, target, model, samples)...)
		})
	}
	if runs("profile") {
		t.Run("profile", func(t *testing.T) { results = append(results, profileCold(t, root, main, samples)...) })
	}
	if runs("turnprofile") {
		t.Run("turn profile", func(t *testing.T) { profileTurn(t, root, main, provider.URL+"/v1", samples) })
	}
	report(t, results, samples)
}

// benchPhase says whether REVENANT_BENCH_PHASES (a comma list of
// "fast" and "recovery"; empty: both) asks for a phase: "fast" is cold and
// warm, on one wrangler; "recovery" the SIGKILL rounds.
func benchPhase(name string) bool {
	phases := os.Getenv("REVENANT_BENCH_PHASES")
	return phases == "" || slices.Contains(strings.Split(phases, ","), name)
}

// benchWordDelay paces the model of the recovery figure so that a kill
// lands mid-stream; cold and warm run with no delay.
const benchWordDelay = 20 * time.Millisecond

// benchText is the prompt of the killed turns: "You said: " and 12 words,
// 14 words streamed, 280 ms of model time at benchWordDelay.
const benchText = "one two three four five six seven eight nine ten eleven twelve"

// benchTarget is one implementation under measurement.
type benchTarget struct {
	name   string
	key    string              // for REVENANT_BENCH_ONLY
	config string              // a wrangler config with main absolute
	vars   func(bool) []string // --var NAME:value for a run; true: the paced model
	// turn sends a prompt on a session whose stream is open and returns
	// once its end was read; kill starts a turn and returns at its third
	// word; done is the log line that says tree's turn ended after a
	// restart; booted the object's first line after a restart; check
	// verifies the turn's answer after that (a client request).
	turn    func(t *testing.T, c *benchClient, sid, text string) (admitted, ended time.Duration)
	kill    func(t *testing.T, c *benchClient, m *benchModel, sid string)
	booted  func(sid string) string
	done    func(sid string) string
	check   func(t *testing.T, c *benchClient, m *benchModel, sid string)
	network bool     // the model is the fake server
	tap     *lineTap // when set, sees every output line with its arrival time
}

type benchResult struct {
	target, figure string
	d              []time.Duration
	note           string
}

func runTarget(t *testing.T, target benchTarget, model *benchModel, n int) []benchResult {
	var out []benchResult
	add := func(figure string, d []time.Duration, note string) {
		out = append(out, benchResult{target.name, figure, d, note})
	}

	// Cold and warm: one wrangler, no model delay.
	model.setDelay(0)
	w := startBench(t, target, false)
	c := &benchClient{t: t, url: "http://127.0.0.1:" + strconv.Itoa(w.port)}
	var create, snapshot, both []time.Duration
	var sids []string
	for range n {
		t0 := time.Now()
		sid := c.create()
		t1 := time.Now()
		c.snapshot(sid)
		t2 := time.Now()
		create, snapshot, both = append(create, t1.Sub(t0)), append(snapshot, t2.Sub(t1)), append(both, t2.Sub(t0))
		sids = append(sids, sid)
	}
	add("cold: POST /v1/sessions to a new object (201)", create, "")
	add("cold: then its first GET snapshot", snapshot, "")
	add("cold: create + first snapshot", both, "")

	sid := sids[0]
	target.turn(t, c, sid, "warm up") // not counted
	var admitted, ended []time.Duration
	for i := range n {
		a, e := target.turn(t, c, sid, fmt.Sprintf("warm prompt %d", i))
		admitted, ended = append(admitted, a), append(ended, e)
	}
	add("warm: POST prompt → 202", admitted, "")
	add("warm: POST prompt → turn ended on the open stream", ended, "")
	w.kill(t)
	if !benchPhase("recovery") {
		return out
	}

	// Recovery: a wrangler with the paced model, killed n times.
	model.setDelay(benchWordDelay)
	w = startBench(t, target, true)
	c.url = "http://127.0.0.1:" + strconv.Itoa(w.port)
	var total, ready, first, rest []time.Duration
	for range n {
		sid := c.create()
		target.kill(t, c, model, sid)
		w.kill(t)
		t0 := time.Now()
		w.startRun(t, target, true)
		t1 := time.Now()
		w.waitLog(t, target.booted(sid), 30*time.Second)
		t2 := time.Now()
		w.waitLog(t, target.done(sid), 30*time.Second)
		t3 := time.Now()
		total, ready, first, rest = append(total, t3.Sub(t0)), append(ready, t1.Sub(t0)), append(first, t2.Sub(t1)), append(rest, t3.Sub(t2))
		target.check(t, c, model, sid)
	}
	w.kill(t)
	add("recovery: start after SIGKILL → turn ended (no client request)", total, "")
	add("recovery: start → wrangler ready", ready, "")
	add("recovery: ready → the object's first log line", first, "")
	add("recovery: first log line → turn ended", rest, "")
	return out
}

// startBench starts wrangler dev for target on a fresh state directory.
func startBench(t *testing.T, target benchTarget, paced bool) *workerd {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	w := &workerd{root: filepath.Dir(wd), config: target.config, state: t.TempDir(), tmp: t.TempDir(), port: freePort(t)}
	t.Cleanup(func() { w.kill(t) })
	w.startRun(t, target, paced)
	return w
}

// startRun is workerd.start with the target's vars and output tap.
func (w *workerd) startRun(t *testing.T, target benchTarget, paced bool) {
	t.Helper()
	w.vars = target.vars(paced)
	if target.tap != nil {
		w.tap = target.tap.add
	}
	w.start(t)
}

// revenantTarget is the project's wrangler.toml (the Go front, the
// directory and the Go object), without the build step, on the Worker
// buildObject built (main, its entry module).
func revenantTarget(t *testing.T, root, main, modelURL string) benchTarget {
	fake := os.Getenv("REVENANT_BENCH_REVENANT_MODEL") != "offline"
	return benchTarget{
		name:    "revenant",
		key:     "revenant",
		config:  testConfig(t, root, main),
		network: fake,
		vars: func(paced bool) []string {
			// REVENANT_BENCH_SPARE=on: a new object takes the isolate's
			// spare Go program (durableobject/shim.js, REVENANT_SPARE).
			vs := benchVars()
			if os.Getenv("REVENANT_BENCH_SPARE") == "on" {
				vs = append(vs, "REVENANT_SPARE:on")
			}
			if fake {
				return append(vs, "OPENAI_BASE_URL:"+modelURL, "REVENANT_MODEL:fake")
			}
			if paced {
				return append(vs, "REVENANT_OFFLINE_WORD_DELAY:"+benchWordDelay.String())
			}
			return vs
		},
		turn: func(t *testing.T, c *benchClient, sid, text string) (time.Duration, time.Duration) {
			s := c.server()
			st := s.follow(sid, s.snapshot(sid).Cursor)
			defer st.close()
			t0 := time.Now()
			pid := s.prompt(sid, text)
			a := time.Since(t0)
			end := st.until("the turn's end", endOf(pid))
			e := time.Since(t0)
			require.Equal(t, typeSucceeded, end.Type)
			return a, e
		},
		kill: func(t *testing.T, c *benchClient, m *benchModel, sid string) {
			s := c.server()
			st := s.follow(sid, 0)
			defer st.close()
			if fake {
				at := m.watch(benchText, 3)
				s.prompt(sid, benchText)
				<-at
				return
			}
			s.prompt(sid, benchText)
			n := 0
			st.until("three words", func(e ev) bool {
				if e.Type == typeDelta {
					n++
				}
				return n == 3
			})
		},
		booted: func(sid string) string { return `msg="tree booted" tree=` + sid + ` resumed=1` },
		done:   func(sid string) string { return `msg="alarm handled" tree=` + sid + ` idle=true` },
		check: func(t *testing.T, c *benchClient, _ *benchModel, sid string) {
			s := c.server()
			sn := s.snapshot(sid)
			require.Equal(t, "idle", sn.Status)
			require.Equal(t, 1, sn.Turns)
			last := sn.Messages[len(sn.Messages)-1]
			require.Equal(t, "You said: "+benchText, last.Text)
		},
	}
}

// plainTarget is testdata/plainjs with its model at modelURL.
func plainTarget(t *testing.T, root, modelURL string) benchTarget {
	return benchTarget{
		name:    "plain JS",
		key:     "plainjs",
		config:  absoluteMain(t, filepath.Join(root, "e2e", "testdata", "plainjs", "wrangler.toml")),
		network: true,
		vars:    func(bool) []string { return []string{"OPENAI_BASE_URL:" + modelURL} },
		turn: func(t *testing.T, c *benchClient, sid, text string) (time.Duration, time.Duration) {
			st := c.plainEvents(sid)
			defer st.Close()
			t0 := time.Now()
			pid := c.plainPrompt(sid, text)
			a := time.Since(t0)
			r := bufio.NewReader(st)
			for {
				line, err := r.ReadString('\n')
				require.NoError(t, err, "the done event of %s", pid)
				if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"prompt_id":"`+pid+`"`) {
					require.Contains(t, line, "You said: "+text)
					return a, time.Since(t0)
				}
			}
		},
		kill: func(t *testing.T, c *benchClient, m *benchModel, sid string) {
			at := m.watch(sid+" "+benchText, 3)
			c.plainPrompt(sid, sid+" "+benchText)
			<-at
		},
		booted: func(sid string) string { return "plainjs: object started tree=" + sid },
		done:   func(sid string) string { return "plainjs: turn done tree=" + sid },
		check: func(t *testing.T, c *benchClient, m *benchModel, sid string) {
			var out struct {
				Status  string
				Prompts []struct{ Answer, State string }
			}
			c.do("GET", "/v1/sessions/"+sid, nil, http.StatusOK, &out)
			require.Equal(t, "idle", out.Status)
			require.Len(t, out.Prompts, 1)
			require.Equal(t, "You said: "+sid+" "+benchText, out.Prompts[0].Answer)
			require.Equal(t, 2, m.requests(sid+" "+benchText), "the plain object asks the model again")
		},
	}
}

// benchVars is REVENANT_BENCH_VARS, a comma list of NAME:value Worker
// vars given to revenant's object (experiments: GOGC:200, say).
func benchVars() []string {
	if v := os.Getenv("REVENANT_BENCH_VARS"); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

// absoluteMain copies a wrangler config into a temporary directory with
// its main made absolute, so wrangler's files stay out of the tree.
func absoluteMain(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if main, ok := strings.CutPrefix(strings.TrimSpace(line), "main = "); ok {
			line = "main = " + strconv.Quote(filepath.Join(filepath.Dir(path), strings.Trim(main, `"`)))
		}
		out = append(out, line)
	}
	dst := filepath.Join(t.TempDir(), "wrangler.toml")
	require.NoError(t, os.WriteFile(dst, []byte(strings.Join(out, "\n")), 0o644))
	return dst
}

// benchClient speaks the API over loopback; server() gives the e2e
// client of the same address for revenant's checks.
type benchClient struct {
	t   *testing.T
	url string
}

func (c *benchClient) server() *server {
	return &server{t: c.t, url: c.url, client: &http.Client{}}
}

func (c *benchClient) do(method, path string, body any, want int, out any) {
	c.server().do(method, path, body, want, out)
}

func (c *benchClient) create() string {
	var out struct{ ID string }
	c.do("POST", "/v1/sessions", map[string]any{}, http.StatusCreated, &out)
	require.NotEmpty(c.t, out.ID)
	return out.ID
}

func (c *benchClient) snapshot(sid string) {
	c.do("GET", "/v1/sessions/"+sid, nil, http.StatusOK, nil)
}

func (c *benchClient) plainPrompt(sid, text string) string {
	var out struct {
		PromptID string `json:"prompt_id"`
	}
	c.do("POST", "/v1/sessions/"+sid+"/prompt", map[string]string{"text": text}, http.StatusAccepted, &out)
	require.NotEmpty(c.t, out.PromptID)
	return out.PromptID
}

// plainEvents opens the plain object's event stream; it is open once the
// response's headers arrived.
func (c *benchClient) plainEvents(sid string) io.ReadCloser {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+"/v1/sessions/"+sid+"/events", nil)
	require.NoError(c.t, err)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		require.NoError(c.t, err)
	}
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	return readCloser{resp.Body, cancel}
}

type readCloser struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (r readCloser) Close() error { r.cancel(); return r.ReadCloser.Close() }

// benchModel is an OpenAI-compatible chat completions endpoint answering
// "You said: " + the last user message, one streamed chunk a word, each
// after the current delay. It counts the requests per text and can
// signal when a text's kth word was sent.
type benchModel struct {
	mu       sync.Mutex
	delay    time.Duration
	seen     map[string]int
	watchers map[string]benchWatch
}

type benchWatch struct {
	k  int
	ch chan struct{}
}

func newBenchModel() *benchModel {
	return &benchModel{seen: map[string]int{}, watchers: map[string]benchWatch{}}
}

func (m *benchModel) setDelay(d time.Duration) {
	m.mu.Lock()
	m.delay = d
	m.mu.Unlock()
}

// watch returns a channel closed once the kth word of the answer to
// text has been sent.
func (m *benchModel) watch(text string, k int) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{})
	m.watchers[text] = benchWatch{k, ch}
	return ch
}

func (m *benchModel) requests(text string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[text]
}

func (m *benchModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	// The prompt is the last user message, past revenant's continuation
	// notice after a resume: the fake answers the prompt, as a model told
	// to continue would finish the same answer.
	var text string
	for i := len(req.Messages) - 1; i >= 0 && text == ""; i-- {
		if msg := req.Messages[i]; msg.Role == "user" && !strings.HasPrefix(msg.Content, "The previous run was interrupted.") {
			text = msg.Content
		}
	}
	m.mu.Lock()
	m.seen[text]++
	delay, watch := m.delay, m.watchers[text]
	delete(m.watchers, text)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	words := strings.SplitAfter("You said: "+text, " ")
	for i, word := range words {
		if delay > 0 {
			select {
			case <-time.After(delay): // the model's pace
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", quote(word))
		flush()
		if watch.ch != nil && i+1 == watch.k {
			close(watch.ch)
		}
	}
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	flush()
}

// report prints each figure's p50 and p90 (nearest rank) and the goals.
func report(t *testing.T, results []benchResult, n int) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "\nworkerd bench: %d samples per figure, p50 / p90 (nearest rank), ms\n", n)
	fmt.Fprintf(&b, "%-10s | %-66s | %8s | %8s\n", "target", "figure", "p50", "p90")
	p := map[string]map[string][2]float64{}
	for _, r := range results {
		p50, p90 := percentile(r.d, 50), percentile(r.d, 90)
		fmt.Fprintf(&b, "%-10s | %-66s | %8.1f | %8.1f\n", r.target, r.figure, p50, p90)
		if os.Getenv("REVENANT_BENCH_RAW") == "1" { // every sample, in order
			fmt.Fprintf(&b, "           | %v\n", r.d)
		}
		if p[r.target] == nil {
			p[r.target] = map[string][2]float64{}
		}
		p[r.target][r.figure] = [2]float64{p50, p90}
	}
	rev, js := p["revenant"], p["plain JS"]
	const cold, warm, rec = "cold: POST /v1/sessions to a new object (201)", "warm: POST prompt → turn ended on the open stream", "recovery: start after SIGKILL → turn ended (no client request)"
	if rev != nil && js != nil {
		fmt.Fprintf(&b, "goals: cold ≤ 1.5× plain JS: %.2f× at p50 (%.2f× at p90); warm ≤ 30 ms p50: %.1f ms; recovery ≤ 2 s: %.0f ms p50, %.0f ms p90\n",
			rev[cold][0]/js[cold][0], rev[cold][1]/js[cold][1], rev[warm][0], rev[rec][0], rev[rec][1])
	}
	t.Log(b.String())
	fmt.Print(b.String())
}

func percentile(d []time.Duration, p int) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100 // nearest rank: ceil(p/100 × n)
	return float64(s[max(i, 1)-1].Microseconds()) / 1000
}

// lineTap keeps wrangler's output lines with the time each arrived.
type lineTap struct {
	mu      sync.Mutex
	lines   []tapLine
	changed chan struct{}
}

type tapLine struct {
	at   time.Time
	text string
}

func (l *lineTap) add(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, tapLine{time.Now(), text})
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// len is the number of lines so far: a position for waitFor.
func (l *lineTap) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// waitFor returns the first line from position from on that contains
// every one of texts, and its position, waiting for wrangler's output (an
// external process) up to 10 s.
func (l *lineTap) waitFor(t *testing.T, from int, texts ...string) (tapLine, int) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		l.mu.Lock()
	next:
		for i, line := range l.lines[from:] {
			for _, text := range texts {
				if !strings.Contains(line.text, text) {
					continue next
				}
			}
			l.mu.Unlock()
			return line, from + i
		}
		from = len(l.lines)
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no output line with %q within 10 s", texts)
		}
	}
}

// profileCold splits revenant's cold create by the marks of
// testdata/revenantprof (the shim with console marks): each phase is the
// time between the arrivals of two marks in this process, so it carries
// the jitter of workerd's log pipe, not a constant offset.
func profileCold(t *testing.T, root, main string, n int) []benchResult {
	// The profiled entry imports the built Worker's modules by relative
	// path, so it goes into the built tree at its place in the repository.
	src, err := os.ReadFile(filepath.Join(root, "e2e", "testdata", "revenantprof", "index.js"))
	require.NoError(t, err)
	entry := filepath.Join(filepath.Dir(filepath.Dir(main)), "e2e", "testdata", "revenantprof", "index.js")
	require.NoError(t, os.MkdirAll(filepath.Dir(entry), 0o755))
	require.NoError(t, os.WriteFile(entry, src, 0o644))
	config := testConfig(t, root, entry)
	tap := &lineTap{}
	target := benchTarget{name: "profiled", config: config, tap: tap, vars: func(bool) []string { return nil }}
	w := startBench(t, target, false)
	defer w.kill(t)
	c := &benchClient{t: t, url: "http://127.0.0.1:" + strconv.Itoa(w.port)}
	phases := []string{"request → shim fetch", "shim fetch → Go start", "Go start: instantiate + go.run",
		"recovery boot", "create in Go (go.fetch)", "answered → client has 201"}
	d := make([][]time.Duration, len(phases))
	var execs, txs [2][]int
	for range n {
		from := tap.len()
		t0 := time.Now()
		c.create()
		t1 := time.Now()
		at := []time.Time{t0}
		var last tapLine
		for _, mark := range []string{" fetch ", " start ", " started ", " booted ", " answered "} {
			last, from = tap.waitFor(t, from, "prof: ", mark)
			at = append(at, last.at)
			if mark == " booted " || mark == " answered " {
				var e, x int
				_, err := fmt.Sscanf(last.text[strings.Index(last.text, "exec="):], "exec=%d tx=%d", &e, &x)
				require.NoError(t, err, last.text)
				i := 0
				if mark == " answered " {
					i = 1
				}
				execs[i], txs[i] = append(execs[i], e), append(txs[i], x)
			}
		}
		at = append(at, t1)
		for i := range phases {
			d[i] = append(d[i], at[i+1].Sub(at[i]))
		}
	}
	var out []benchResult
	for i, p := range phases {
		out = append(out, benchResult{target: "profiled", figure: "cold create: " + p, d: d[i]})
	}
	t.Logf("sql.exec / transactionSync calls (cumulative per object): after boot %v / %v; after create %v / %v",
		slices.Max(execs[0]), slices.Max(txs[0]), slices.Max(execs[1]), slices.Max(txs[1]))
	return out
}

// profileTurn splits revenant's warm turn (prompt → the turn's end on an
// open stream, the fake model at zero delay) by the turn marks of
// testdata/revenantprof (PROF_TURN): every transactionSync, storage.sync,
// alarm call, the model's fetch and its body's chunks, and each chunk
// written to an event stream. It prints, for each mark in a turn's order,
// its p50 arrival after the prompt was sent, and one whole turn's marks.
func profileTurn(t *testing.T, root, main, modelURL string, n int) {
	src, err := os.ReadFile(filepath.Join(root, "e2e", "testdata", "revenantprof", "index.js"))
	require.NoError(t, err)
	entry := filepath.Join(filepath.Dir(filepath.Dir(main)), "e2e", "testdata", "revenantprof", "index.js")
	require.NoError(t, os.MkdirAll(filepath.Dir(entry), 0o755))
	require.NoError(t, os.WriteFile(entry, src, 0o644))
	tap := &lineTap{}
	target := benchTarget{name: "profiled", config: testConfig(t, root, entry), tap: tap, vars: func(bool) []string {
		vs := append(benchVars(), "OPENAI_BASE_URL:"+modelURL, "REVENANT_MODEL:fake")
		if os.Getenv("REVENANT_BENCH_MARKS") == "off" { // the figures alone, without the marks' cost
			return vs
		}
		return append(vs, "PROF_TURN:on")
	}}
	w := startBench(t, target, false)
	defer w.kill(t)
	c := &benchClient{t: t, url: "http://127.0.0.1:" + strconv.Itoa(w.port)}
	s := c.server()
	sid := c.create()
	st := s.follow(sid, s.snapshot(sid).Cursor)
	defer st.close()
	turn := func(text string) (time.Duration, time.Duration) {
		t0 := time.Now()
		pid := s.prompt(sid, text)
		a := time.Since(t0)
		end := st.until("the turn's end", endOf(pid))
		require.Equal(t, typeSucceeded, end.Type, "%s", end.Data)
		return a, time.Since(t0)
	}
	turn("warm up")
	type mark struct {
		key string
		at  time.Duration // after the object saw the prompt's request
		ms  int64         // the object's Date.now()
	}
	var admitted, ended []time.Duration
	for i := range n {
		a, e := turn(fmt.Sprintf("warm prompt %d", i))
		admitted, ended = append(admitted, a), append(ended, e)
	}
	if os.Getenv("REVENANT_BENCH_MARKS") == "off" {
		fmt.Printf("turn figures without marks: %d turns; 202 p50 %.1f p90 %.1f; end p50 %.1f p90 %.1f\n", n,
			percentile(admitted, 50), percentile(admitted, 90), percentile(ended, 50), percentile(ended, 90))
		return
	}
	// The marks of the last turn may still be on their way: a snapshot's
	// request mark comes after them.
	from := tap.len()
	s.snapshot(sid)
	tap.waitFor(t, from, "turnprof ", "req GET")
	tap.mu.Lock()
	var all []mark
	for _, l := range tap.lines {
		text, ok := strings.CutPrefix(strings.TrimSpace(l.text), "turnprof ")
		if !ok {
			continue
		}
		stamp, what, _ := strings.Cut(text, " ")
		ms, err := strconv.ParseInt(stamp, 10, 64)
		require.NoError(t, err, l.text)
		all = append(all, mark{key: what, ms: ms})
	}
	tap.mu.Unlock()
	// Split by the prompts' requests (stable: marks of one event keep
	// their order); the first window is the warm-up turn.
	slices.SortStableFunc(all, func(a, b mark) int { return int(a.ms - b.ms) })
	var turns [][]mark
	for _, m := range all {
		if m.key == "req POST prompt" {
			turns = append(turns, nil)
		}
		if len(turns) > 0 {
			turns[len(turns)-1] = append(turns[len(turns)-1], m)
		}
	}
	require.Len(t, turns, n+1, "one window per prompt")
	turns = turns[1:]
	for i, ms := range turns {
		seen := map[string]int{}
		for j := range ms {
			key := ms[j].key
			if f := strings.Fields(key); len(f) > 0 && (f[0] == "tx+" || f[0] == "tx-") {
				key = f[0] + " " + strings.Join(f[2:], " ") // the tx number grows per turn
			}
			seen[key]++
			ms[j].key = fmt.Sprintf("%s #%d", key, seen[key])
			ms[j].at = time.Duration(ms[j].ms-ms[0].ms) * time.Millisecond
		}
		turns[i] = ms
	}
	// For each mark, in the order of the median turn: its p50 arrival.
	at := map[string][]time.Duration{}
	for _, ms := range turns {
		for _, m := range ms {
			at[m.key] = append(at[m.key], m.at)
		}
	}
	mid := slices.IndexFunc(ended, func(d time.Duration) bool { return float64(d.Microseconds())/1000 == percentile(ended, 50) })
	var b bytes.Buffer
	fmt.Fprintf(&b, "\nturn profile: %d turns; prompt → 202 p50 %.1f ms, → turn end p50 %.1f ms\n", n, percentile(admitted, 50), percentile(ended, 50))
	fmt.Fprintf(&b, "object's clock (Date.now, moves between events), ms after the prompt's request reached the object\n")
	fmt.Fprintf(&b, "%-48s | %5s | %8s | %8s | %s\n", "mark (in the median turn's order)", "turns", "p50 ms", "p90 ms", "median turn ms")
	for _, m := range turns[mid] {
		fmt.Fprintf(&b, "%-48s | %5d | %8.1f | %8.1f | %8.1f\n", m.key, len(at[m.key]), percentile(at[m.key], 50), percentile(at[m.key], 90), float64(m.at.Microseconds())/1000)
	}
	fmt.Fprintf(&b, "median turn: 202 at %.1f ms, end on the stream at %.1f ms\n", float64(admitted[mid].Microseconds())/1000, float64(ended[mid].Microseconds())/1000)
	t.Log(b.String())
	fmt.Print(b.String())
}
