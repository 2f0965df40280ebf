package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Timeouts: a wait that takes longer fails the test instead of hanging it.
const (
	waitTimeout = 30 * time.Second
	wordDelay   = "20ms"
)

// server is one revenant process serving on a free loopback port.
type server struct {
	t      *testing.T
	dir    string
	env    []string // extra environment, kept across restarts
	url    string
	pid    int
	cmd    *exec.Cmd
	client *http.Client
	logs   *logBuffer
	// drained is closed once the process's stderr reached EOF: the process
	// (the only writer) is gone.
	drained chan struct{}

	mu      sync.Mutex
	waited  bool
	waitErr error
}

// logBuffer keeps a server's stderr, for waits on a log line and for the
// test's failure report.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced at every line
}

func (b *logBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(line)
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// seen reports whether the log holds text, and otherwise returns a channel
// closed at the next line.
func (b *logBuffer) seen(text string) (bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if strings.Contains(b.buf.String(), text) {
		return true, nil
	}
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return false, b.changed
}

// watch returns the log and a channel closed at the next line, read
// together: no line comes between them unnoticed.
func (b *logBuffer) watch() (string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.buf.String(), b.changed
}

// tail is the last n lines.
func (b *logBuffer) tail(n int) string {
	lines := strings.SplitAfter(b.String(), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var servingAddr = regexp.MustCompile(`msg="revenant serving" addr=(http://127\.0\.0\.1:[0-9]+)`)

// serverEnv is the environment without any revenant or provider setting
// of the caller's, plus the address and data directory.
func serverEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "REVENANT_") || strings.HasPrefix(kv, "OPENAI_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "REVENANT_ADDR=127.0.0.1:0", "REVENANT_DATA="+dir)
}

// start runs revenant over dir and returns once it logged that it serves.
// The test's cleanup kills it if it still runs.
func start(t *testing.T, dir string) *server { return startWith(t, dir) }

// startWith is start with extra environment (KEY=value), such as a
// provider's address.
func startWith(t *testing.T, dir string, extraEnv ...string) *server {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"-offline-word-delay=" + wordDelay}, modeArgs(t)...)...)
	cmd.Env = append(serverEnv(dir), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	trackGroup(cmd.Process.Pid)
	s := &server{t: t, dir: dir, env: extraEnv, pid: cmd.Process.Pid, cmd: cmd, logs: &logBuffer{}, drained: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	t.Cleanup(func() {
		s.halt(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("stderr of revenant pid %d:\n%s", s.pid, s.logs.String())
		}
		if ok, _ := s.logs.seen("level=ERROR"); ok {
			t.Errorf("revenant pid %d logged an error:\n%s", s.pid, s.logs.String())
		}
	})
	serving := make(chan string, 1)
	go s.readLogs(stderr, serving)

	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case addr := <-serving:
		s.url = addr
	case <-s.drained:
		s.halt(syscall.SIGKILL)
		t.Fatalf("revenant exited before serving (%v); stderr:\n%s", s.waitErr, s.logs.String())
	case <-timer.C:
		t.Fatalf("revenant did not log that it serves within %v; stderr:\n%s", waitTimeout, s.logs.String())
	}
	return s
}

// readLogs scans stderr line by line, reports the serving address once and
// keeps draining into the buffer until EOF.
func (s *server) readLogs(r io.Reader, serving chan<- string) {
	defer close(s.drained)
	br := bufio.NewReader(r)
	announced := false
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			s.logs.add(line)
			if !announced {
				if m := servingAddr.FindStringSubmatch(line); m != nil {
					announced = true
					serving <- m[1]
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// halt signals the process group and reaps the process. It is idempotent:
// a process already reaped is left alone, so a recycled pid is never hit.
func (s *server) halt(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waited {
		return s.waitErr
	}
	if err := syscall.Kill(-s.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.t.Errorf("signal %v to revenant group %d: %v", sig, s.pid, err)
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case <-s.drained:
	case <-timer.C:
		// A graceful stop that hangs: fail, then make sure it dies.
		s.t.Errorf("revenant pid %d did not exit within %v of %v", s.pid, waitTimeout, sig)
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		<-s.drained
	}
	s.waitErr = s.cmd.Wait()
	s.waited = true
	untrackGroup(s.pid) // its only process is reaped: the group is gone
	s.client.CloseIdleConnections()
	return s.waitErr
}

// waitLog waits until the server logged text.
func (s *server) waitLog(text string) {
	s.t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		ok, next := s.logs.seen(text)
		if ok {
			return
		}
		select {
		case <-next:
		case <-s.drained:
			if ok, _ := s.logs.seen(text); !ok {
				s.t.Fatalf("revenant exited without logging %q; stderr:\n%s", text, s.logs.String())
			}
			return
		case <-timer.C:
			s.t.Fatalf("revenant did not log %q within %v; stderr:\n%s", text, waitTimeout, s.logs.String())
		}
	}
}

// signal sends sig to the server's process group without waiting.
func (s *server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	waited := s.waited
	var err error
	if !waited {
		err = syscall.Kill(-s.pid, sig)
	}
	s.mu.Unlock()
	require.False(s.t, waited, "signal: revenant pid %d had already exited", s.pid)
	require.NoError(s.t, err)
}

// kill SIGKILLs the server's process group mid-whatever and reaps it.
func (s *server) kill() {
	s.t.Helper()
	s.mu.Lock()
	already := s.waited
	s.mu.Unlock()
	require.False(s.t, already, "kill: revenant pid %d had already exited", s.pid)
	_ = s.halt(syscall.SIGKILL)
	kills.Add(1)
}

// restart starts a new server over the same data directory; the old one
// must have exited.
func (s *server) restart() *server {
	s.t.Helper()
	s.mu.Lock()
	waited := s.waited
	s.mu.Unlock()
	require.True(s.t, waited, "restart: revenant pid %d still runs", s.pid)
	return startWith(s.t, s.dir, s.env...)
}

// stop is the graceful stop: SIGTERM, then the process must exit cleanly.
func (s *server) stop() {
	s.t.Helper()
	err := s.halt(syscall.SIGTERM)
	require.NoError(s.t, err, "revenant pid %d after SIGTERM; stderr:\n%s", s.pid, s.logs.String())
}
