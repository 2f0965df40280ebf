package fakehost_test

import (
	"testing"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/hosttest"
)

func TestClockConformance(t *testing.T) {
	hosttest.RunClock(t, func(conform.T) core.Clock { return fakehost.NewClock(1_700_000_000_000) })
}

func TestWakerConformance(t *testing.T) {
	hosttest.RunWaker(t, func(conform.T) hosttest.ObservableWaker { return &fakehost.Waker{} })
}

func TestIDsConformance(t *testing.T) {
	hosttest.RunIDs(t, func(conform.T) core.IDSource { return &fakehost.IDs{Prefix: "id"} })
}
