package host_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
)

// A server started on a full disk serves reads and refuses writes with
// 503 read_only, in both modes; the first write storage takes again makes
// the tree writable (docs/api.md, Storage failures). Opening an index that
// is already at its schema version writes nothing.
func TestStartOnFullDiskServesReadOnly(t *testing.T) {
	for _, guest := range []bool{false, true} {
		name := "inprocess"
		if guest {
			name = "guest"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			vfs := "host-full-" + strings.ReplaceAll(t.Name(), "/", "-")
			fault := e.faultVFS(t, vfs)
			config := func() host.Config {
				cfg := e.config()
				if guest {
					cfg = e.guestConfig()
				}
				return host.WithVFS(cfg, vfs)
			}

			h := e.open(config())
			base := apiServer(t, h, guest)
			id := create(t, base)
			require.NoError(t, h.Close(ctx))

			fault.FailFor(time.Hour, faultvfs.Full)
			h = e.open(config())
			base = apiServer(t, h, guest)

			a := call(t, base, "GET", "/v1/sessions/"+id, "alice-token", "")
			require.Equal(t, http.StatusOK, a.Status, a.raw)
			assert.Equal(t, true, a.Body["read_only"], a.raw)
			a = call(t, base, "GET", "/v1/sessions", "alice-token", "")
			require.Equal(t, http.StatusOK, a.Status, a.raw)
			a = call(t, base, "POST", "/v1/sessions/"+id+"/prompt", "alice-token", `{"text":"hi","id":"p1"}`)
			assert.Equal(t, http.StatusServiceUnavailable, a.Status, a.raw)
			assert.Equal(t, "read_only", a.Type, a.raw)
			assert.Positive(t, fault.Failed(), "storage was asked to write and refused")

			fault.Heal()
			a = call(t, base, "POST", "/v1/sessions/"+id+"/prompt", "alice-token", `{"text":"hi","id":"p1"}`)
			assert.Equal(t, http.StatusAccepted, a.Status, a.raw)
		})
	}
}

// An index that cannot be created because storage refuses the write fails
// Open with a message that says so, and, when the database is locked, asks
// whether another server uses the data directory (the likeliest cause).
func TestNewIndexRefusedByStorageFailsClearly(t *testing.T) {
	for name, code := range map[string]faultvfs.Code{"full": faultvfs.Full, "busy": faultvfs.Busy} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			vfs := "host-" + name + "-new-index"
			fault := e.faultVFS(t, vfs)
			fault.FailFor(time.Hour, code)
			_, err := host.Open(ctx, host.WithVFS(e.config(), vfs))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "storage refused the write that creates or migrates it")
			if code == faultvfs.Full {
				assert.NotContains(t, err.Error(), "another server")
			} else {
				assert.Contains(t, err.Error(), "is another server using this data directory?")
			}
		})
	}
}

// A prompt whose wake-up the host cannot store at first is retried on the
// write schedule and admitted once storage takes it: in guest mode the
// refused wake_arm is a storage error the guest retries, as in process
// (core's claimingWrite), never a trap ("the tree's instance stopped").
// (The guest's retry waits run on real timers: 100 ms, then 200 ms.)
func TestGuestPromptWhoseWakeArmIsRefusedIsRetried(t *testing.T) {
	e := newEnv(t)
	fault := e.faultVFS(t, "host-guest-arm")
	h := e.open(host.WithVFS(e.guestConfig(), "host-guest-arm"))
	base := apiServer(t, h, true)
	id := create(t, base)

	fault.FailNext(2, faultvfs.Full)
	a := call(t, base, "POST", "/v1/sessions/"+id+"/prompt", "alice-token", `{"text":"hi","id":"p1"}`)
	assert.Equal(t, http.StatusAccepted, a.Status, a.raw)
	assert.Equal(t, 2, fault.Failed(), "storage refused two writes")
	a = call(t, base, "GET", "/v1/sessions/"+id, "alice-token", "")
	require.Equal(t, http.StatusOK, a.Status, a.raw)
	assert.Nil(t, a.Body["read_only"], a.raw)
}

// A wake-up delivery that fails does not leave its tree counted in use:
// once its turn ends and it sits idle, idle eviction closes it.
func TestFailedWakeupDeliveryLeavesTreeClosable(t *testing.T) {
	e := newEnv(t)
	fault := e.faultVFS(t, "host-wake-leak")
	h := e.open(host.WithVFS(e.config(), "host-wake-leak"))
	inst := e.tree(h, "t")
	admit(t, inst, "t", "hold")
	e.d.next(t)

	fault.FailFor(time.Hour, faultvfs.Full)
	e.clock.Advance(10 * time.Second)
	d := e.nextDelivery()
	require.Error(t, d.err, "the delivery failed")
	fault.Heal()

	e.d.Release()
	idle(t, inst)
	e.clock.Advance(2 * time.Minute)
	// The retry of the failed delivery fires with that; while it runs the
	// tree is in use, so wait for it to settle before evicting.
	require.NoError(t, e.nextDelivery().err, "the retry found storage healed")
	assert.Equal(t, 1, h.EvictIdle(ctx), "the idle tree is closed")
}

// A guest's prompt whose first wake-up store the host refuses is admitted
// only once a store succeeded: the wake-up row exists when the 202 is
// answered (DESIGN §4: no claim without a wake-up). Refusing one write
// shows it; refusing two (the test above) lets a retry re-arm anyway.
func TestGuestPromptAdmittedOnlyWithItsWakeupStored(t *testing.T) {
	e := newEnv(t)
	fault := e.faultVFS(t, "host-guest-arm1")
	h := e.open(host.WithVFS(e.guestConfig(), "host-guest-arm1"))
	base := apiServer(t, h, true)
	id := create(t, base)
	require.Zero(t, e.wakeups()[id], "no wake-up before the prompt")

	fault.FailNext(1, faultvfs.Full)
	a := call(t, base, "POST", "/v1/sessions/"+id+"/prompt", "alice-token", `{"text":"hi","id":"p1"}`)
	assert.Equal(t, http.StatusAccepted, a.Status, a.raw)
	assert.Equal(t, 1, fault.Failed())
	assert.NotZero(t, e.wakeups()[id], "the claim committed with its wake-up stored")
}

// A tree whose sweeps fail (its storage refuses writes) is woken on the
// wake schedule, 1 s doubling to 1 min, not every wake interval: the wake
// handler's last re-arm backs off with the failures (core's Rearm), so
// the host's own retry of the failed delivery is the wake-up that fires
// (DESIGN §4). With storage back, the next delivery resumes the turn.
func TestFailingSweepsAreWokenOnTheWakeSchedule(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Second) // the Worker's
	vfs := "host-sweep-backoff"
	fault := e.faultVFS(t, vfs)
	h := e.open(host.WithVFS(e.config(), vfs))
	first := admit(t, e.tree(h, "t"), "t", "hold")
	e.d.next(t)
	h.Crash()

	fault.FailFor(time.Hour, faultvfs.Full)
	h = e.open(host.WithVFS(e.config(), vfs)) // its boot of t sweeps, and fails
	for failed := 1; failed <= 8; failed++ {
		require.Error(t, e.nextDelivery().err, "delivery %d", failed)
		want := e.clock.Now() + retry.Wake().Delay(failed-1).Milliseconds()
		require.Equal(t, want, h.WakeTimerAt("t"), "the wake-up after %d failed deliveries", failed)
		e.clock.Set(want)
	}
	fault.Heal()
	require.NoError(t, e.nextDelivery().err)
	assert.Equal(t, first, e.d.next(t).PromptID(), "resumed once storage took writes")
	e.d.Release()
}
