package e2e

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// groups are the process groups this run started and has not yet seen
// end: revenant servers and wrangler dev (with its workerd). go test's
// -timeout panics the test binary without running any Cleanup, and
// workerd would outlive it for hours; endGroupsBeforeTimeout ends these
// groups first. A group leaves the set once it is gone, so a recycled
// group id is never signalled.
var groups = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

func trackGroup(pgid int) {
	groups.Lock()
	groups.m[pgid] = true
	groups.Unlock()
}

func untrackGroup(pgid int) {
	groups.Lock()
	delete(groups.m, pgid)
	groups.Unlock()
}

// timeoutMargin is how long before -timeout the run ends its groups: the
// tests still running fail on their dead servers, and the timeout's panic
// then leaves nothing behind.
const timeoutMargin = 20 * time.Second

// endGroupsBeforeTimeout arms a timer that SIGKILLs every tracked group
// timeoutMargin before the run's -timeout (none: no timer). It returns
// the timer's stop.
func endGroupsBeforeTimeout() func() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() bool { return false }
	}
	d, err := time.ParseDuration(f.Value.String())
	if err != nil || d <= 2*timeoutMargin {
		return func() bool { return false }
	}
	t := time.AfterFunc(d-timeoutMargin, func() {
		groups.Lock()
		defer groups.Unlock()
		fmt.Fprintf(os.Stderr, "e2e: -timeout %v is %v away: ending the %d process groups this run started\n", d, timeoutMargin, len(groups.m))
		for pgid := range groups.m {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})
	return t.Stop
}

// groupRunning reports whether a process of group pgid is still running.
// A member that has exited but is not reaped yet does not count: such a
// zombie holds no file, socket or memory any more, and once its parent
// is gone too it waits for init to reap it, which takes over a second
// where init is busy (wrangler's node, esbuild and workerd, after a
// SIGKILL of the group). Where /proc cannot be read, or is not this
// process's view, every member counts.
func groupRunning(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	if self, err := procStat("self"); err != nil || self.pid != os.Getpid() {
		return true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := procStat(e.Name())
		if err != nil {
			continue // gone since the listing
		}
		if st.pgrp == pgid && st.state != "Z" && st.state != "X" {
			return true
		}
	}
	return false
}

type procStatus struct {
	pid, pgrp int
	state     string
}

// procStat reads /proc/<name>/stat: "pid (comm) state ppid pgrp ...",
// where comm may hold spaces and parentheses.
func procStat(name string) (procStatus, error) {
	b, err := os.ReadFile("/proc/" + name + "/stat")
	if err != nil {
		return procStatus{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStatus{}, fmt.Errorf("/proc/%s/stat: %q", name, s)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 3 {
		return procStatus{}, fmt.Errorf("/proc/%s/stat: %q", name, s)
	}
	pid, err1 := strconv.Atoi(strings.TrimSpace(s[:open]))
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procStatus{}, fmt.Errorf("/proc/%s/stat: %q", name, s)
	}
	return procStatus{pid: pid, pgrp: pgrp, state: f[0]}, nil
}
