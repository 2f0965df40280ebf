package conform

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// Recorder is a T that keeps what happened instead of reporting it. Record
// makes one; each Run makes a child, run to its end (cleanups included)
// before Run returns.
type Recorder struct {
	name   string
	parent *Recorder

	mu       sync.Mutex
	failed   bool
	skipped  bool
	logs     []string
	cleanups []func()
	children []*Recorder
}

var _ T = (*Recorder)(nil)

// Record runs f on a fresh Recorder named name and returns it once f and
// its cleanups have finished.
func Record(name string, f func(t T)) *Recorder {
	r := &Recorder{name: name}
	r.run(f)
	return r
}

// run calls f on its own goroutine, so that FailNow and Skip can end it
// with runtime.Goexit as testing does, then runs the cleanups.
func (r *Recorder) run(f func(t T)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer r.runCleanups()
		f(r)
	}()
	<-done
}

func (r *Recorder) runCleanups() {
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			return
		}
		c := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		c()
	}
}

// Helper does nothing: a Recorder has no file positions to hide.
func (r *Recorder) Helper() {}

// Name is the slash-separated path of names from the root Recorder.
func (r *Recorder) Name() string { return r.name }

// Logf records a log line.
func (r *Recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

// Errorf records the failure and goes on, like testing.T.Errorf.
func (r *Recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	r.fail()
}

// fail marks r and every ancestor failed, as a failed subtest fails its
// parent.
func (r *Recorder) fail() {
	for x := r; x != nil; x = x.parent {
		x.mu.Lock()
		x.failed = true
		x.mu.Unlock()
	}
}

// FailNow records the failure and ends the calling goroutine.
func (r *Recorder) FailNow() {
	r.fail()
	runtime.Goexit()
}

// Failed reports whether r or one of its children failed.
func (r *Recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Skip records the skip and ends the calling goroutine.
func (r *Recorder) Skip(args ...any) {
	r.mu.Lock()
	r.skipped = true
	r.logs = append(r.logs, fmt.Sprint(args...))
	r.mu.Unlock()
	runtime.Goexit()
}

// Cleanup registers f to run when r's function has returned, last
// registered first.
func (r *Recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// Run runs f as a child named name and reports whether it passed.
func (r *Recorder) Run(name string, f func(t T)) bool {
	c := &Recorder{name: r.name + "/" + name, parent: r}
	r.mu.Lock()
	r.children = append(r.children, c)
	r.mu.Unlock()
	c.run(f)
	return !c.Failed()
}

// Failures are the names of the failed tests that have no failed children
// (the tests whose own checks failed), in the order they ran.
func (r *Recorder) Failures() []string {
	var out []string
	r.walk(func(x *Recorder) {
		if x.Failed() && !slices.ContainsFunc(x.kids(), (*Recorder).Failed) {
			out = append(out, x.name)
		}
	})
	return out
}

// Skipped are the names of the skipped tests, in the order they ran.
func (r *Recorder) Skipped() []string {
	var out []string
	r.walk(func(x *Recorder) {
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.skipped {
			out = append(out, x.name)
		}
	})
	return out
}

// Logs are the lines r itself recorded (its failures' messages among them).
func (r *Recorder) Logs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.logs)
}

// Find returns the recorder of the test named name (as Name reports it),
// or nil.
func (r *Recorder) Find(name string) *Recorder {
	var found *Recorder
	r.walk(func(x *Recorder) {
		if found == nil && x.name == name {
			found = x
		}
	})
	return found
}

func (r *Recorder) kids() []*Recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.children)
}

func (r *Recorder) walk(f func(*Recorder)) {
	f(r)
	for _, c := range r.kids() {
		c.walk(f)
	}
}
