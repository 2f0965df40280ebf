package e2e

import (
	"flag"
	"fmt"
	"os"
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
