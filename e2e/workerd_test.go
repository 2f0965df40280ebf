package e2e

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Durable Object host under local workerd (wrangler dev), killed with
// SIGKILL like the local server. Skipped where node, npx or the pinned
// wrangler (npm ci) is missing. Runs serially: workerd is heavy and the
// build directory (build/do) is shared.

// workerd is one `wrangler dev` process group serving on a loopback port,
// with its state under a directory that survives restarts.
type workerd struct {
	t     *testing.T
	root  string // the module root, where wrangler.toml is
	state string // --persist-to
	port  int

	cmd  *exec.Cmd
	logs *logBuffer
	done chan struct{} // closed when the group leader was reaped
}

func requireWrangler(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("workerd e2e: skipped with -short")
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	root := filepath.Dir(wd)
	for _, bin := range []string{"node", "npx"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("workerd e2e: no %s on PATH", bin)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", ".bin", "wrangler")); err != nil {
		t.Skip("workerd e2e: no node_modules/.bin/wrangler (run npm ci)")
	}
	return root
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

func startWorkerd(t *testing.T, root, state string, port int) *workerd {
	t.Helper()
	w := &workerd{t: t, root: root, state: state, port: port, logs: &logBuffer{}, done: make(chan struct{})}
	w.start()
	t.Cleanup(w.kill)
	return w
}

// start runs wrangler dev in its own process group (setsid), offline and
// on loopback (PLATFORM.md), and returns once it reported ready. Its
// [build] command rebuilds the wasm first.
func (w *workerd) start() {
	w.t.Helper()
	cmd := exec.Command("npx", "wrangler", "dev", "--ip", "127.0.0.1", "--port", strconv.Itoa(w.port),
		"--inspector-port", "0", "--persist-to", w.state, "--show-interactive-dev-session=false")
	cmd.Dir = w.root
	cmd.Env = append(os.Environ(), "CLOUDFLARE_CF_FETCH_ENABLED=false", "WRANGLER_SEND_METRICS=false",
		"WRANGLER_SEND_ERROR_REPORTS=false", "CI=1", "NO_COLOR=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(w.t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(w.t, cmd.Start())
	w.cmd, w.done, w.logs = cmd, make(chan struct{}), &logBuffer{} // this run's output only
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				w.logs.add(line)
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-lines // the pipe's EOF first: Wait closes it
		_ = cmd.Wait()
		close(w.done)
	}()
	w.waitLog("Ready on http://127.0.0.1:"+strconv.Itoa(w.port), 2*time.Minute) // includes the go build
}

// waitLog waits until wrangler's output (the objects' logs included) holds
// text; it fails the test past limit or if wrangler exited.
func (w *workerd) waitLog(text string, limit time.Duration) {
	w.t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		ok, changed := w.logs.seen(text)
		if ok {
			return
		}
		select {
		case <-changed:
		case <-w.done:
			if ok, _ := w.logs.seen(text); !ok {
				w.t.Fatalf("wrangler exited before %q:\n%s", text, w.logs)
			}
			return
		case <-deadline.C:
			w.t.Fatalf("no %q within %v:\n%s", text, limit, w.logs)
		}
	}
}

// kill SIGKILLs the whole process group (wrangler, its cli, esbuild and
// both workerd processes) and waits until none of it is left. Only the
// group this test started.
func (w *workerd) kill() {
	if w.cmd == nil {
		return
	}
	pgid := w.cmd.Process.Pid
	w.cmd = nil
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-w.done
	// The other members were killed with the leader; wait for the kernel
	// to finish them so the port and the state files are free.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		select {
		case <-tick.C:
		case <-deadline:
			w.t.Errorf("process group %d still alive 10 s after SIGKILL", pgid)
			return
		}
	}
}

func (w *workerd) client() *server {
	return &server{t: w.t, url: "http://127.0.0.1:" + strconv.Itoa(w.port), client: &http.Client{}}
}

// A turn SIGKILLed mid-step on workerd is finished by the object's alarm
// after a restart, with no client request, exactly once.
func TestWorkerdSIGKILLMidTurnResumesFromAlarm(t *testing.T) {
	root := requireWrangler(t)
	state := t.TempDir()
	port := freePort(t)
	w := startWorkerd(t, root, state, port)
	s := w.client()

	sid := s.create()
	st := s.follow(sid, 0)
	promptID := s.prompt(sid, "/sleep 2s\nI survive restarts.")
	st.until("the sleeping step", forPrompt(typeStepStarted, promptID))
	st.close()

	w.kill()
	kills.Add(1)
	restarted := time.Now()
	w.start()
	// No request reaches the object: its alarm wakes it, the boot's sweep
	// resumes the turn, and the alarm handler holds until it ran.
	w.waitLog(`msg="tree booted" tree=`+sid+` resumed=1`, 30*time.Second)
	w.waitLog(`msg="alarm handled" tree=`+sid+` idle=true`, 30*time.Second)
	t.Logf("restart → turn completed by the alarm: %v", time.Since(restarted))

	snap := s.snapshot(sid)
	require.Equal(t, "idle", snap.Status)
	log := s.readLog(sid, snap.Cursor)
	sum := checkLog(t, log, []string{promptID})
	sum.requireEnd(t, promptID, typeSucceeded, "")
	var resumed, succeeded int
	for _, e := range log {
		switch e.Type {
		case typeResumed:
			resumed++
		case typeSucceeded:
			succeeded++
		}
	}
	require.Equal(t, 1, resumed, "resumed once, by the alarm:%s", describe(log))
	require.Equal(t, 1, succeeded, "the turn ended exactly once:%s", describe(log))
	last := snap.Messages[len(snap.Messages)-1]
	require.Equal(t, "assistant", last.Role)
	require.Equal(t, "You said: I survive restarts.", last.Text)
}
