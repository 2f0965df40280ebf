package host_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
)

// A prompt whose wake-up the host cannot store at first is retried on the
// write schedule and admitted once storage takes it: in guest mode the
// refused wake_arm is a storage error the guest retries, as in process
// (core's claimingWrite), never a trap ("the tree's instance stopped").
// (The guest's retry waits run on real timers: 100 ms, then 200 ms.)
func TestGuestPromptWhoseWakeArmIsRefusedIsRetried(t *testing.T) {
	e := newEnv(t)
	fault := faultvfs.New(e.clock.Now)
	faultvfs.Register("host-guest-arm", fault)
	t.Cleanup(func() { faultvfs.Unregister("host-guest-arm") })
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
