package host_test

import (
	"testing"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/hosttest"
	"github.com/revenantrt/revenant/host"
)

// The local host's real clock and random ids meet the suites core's fakes
// meet (core/fakehost). Its wake-up is a row in the index plus a timer,
// tested with the host itself (host_test.go): the suite cannot see it.
func TestRealClockConformance(t *testing.T) {
	hosttest.RunClock(t, func(conform.T) core.Clock { return host.RealClock{} })
}

func TestRandomIDsConformance(t *testing.T) {
	hosttest.RunIDs(t, func(conform.T) core.IDSource { return host.RandomIDs{} })
}
