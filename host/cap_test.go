package host_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/host"
)

// withCap returns cfg capped at most open trees, reporting on released
// each tree a request stops using.
func withCap(cfg host.Config, most int, released chan<- string) host.Config {
	cfg.MaxOpenTrees = most
	if released == nil {
		return cfg
	}
	return host.WithReleaseHook(cfg, func(id string) { released <- id })
}

// waitReleased waits until a request stops using tree id.
func waitReleased(t *testing.T, released <-chan string, id string) {
	t.Helper()
	for {
		select {
		case got := <-released:
			if got == id {
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("tree %s was not released", id)
		}
	}
}

// open reports whether the tree's database is open (its WAL exists only
// while a connection has it open).
func (e *env) isOpen(id string) bool { return exists(e.treePath(id) + "-wal") }

// At the cap, opening one more tree closes the least recently used idle
// one, whatever its idle time; the closed tree reads back intact when it
// is opened again (closing another in its turn). Opening a tree already
// open never closes anything.
func TestCapClosesLeastRecentlyUsedTree(t *testing.T) {
	e := newEnv(t)
	h := e.open(withCap(e.config(), 2, nil))
	a := e.tree(h, "a")
	pid := admit(t, a, "a", "remember this")
	e.d.next(t)
	idle(t, a)
	before, err := a.Events(ctx, "a", 0, 0)
	require.NoError(t, err)
	e.clock.Advance(time.Millisecond)
	e.tree(h, "b")
	e.clock.Advance(time.Millisecond)
	_, _, err = h.Get(ctx, "a") // a is now the more recently used
	require.NoError(t, err)
	e.clock.Advance(time.Millisecond)

	e.tree(h, "c")
	st := h.Stats()
	assert.Equal(t, 2, st.Instances)
	assert.Equal(t, int64(1), st.CapEvictions)
	assert.Zero(t, st.Evictions, "no idle eviction ran")
	assert.False(t, e.isOpen("b"), "the least recently used tree was closed")
	assert.True(t, e.isOpen("a"))
	assert.True(t, e.isOpen("c"))

	for _, id := range []string{"a", "c"} {
		_, _, err = h.Get(ctx, id)
		require.NoError(t, err, "an open tree is read at the cap")
	}
	assert.Equal(t, int64(1), h.Stats().CapEvictions, "reads of open trees close nothing")

	e.clock.Advance(time.Millisecond)
	b, _, err := h.Get(ctx, "b")
	require.NoError(t, err)
	_, err = b.Session(ctx, "b")
	require.NoError(t, err, "b reads back after reopening")
	assert.False(t, e.isOpen("a"), "a was the least recently used now")

	e.clock.Advance(time.Millisecond)
	a2, _, err := h.Get(ctx, "a")
	require.NoError(t, err)
	assert.NotSame(t, a, a2)
	after, err := a2.Events(ctx, "a", 0, 0)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a's log is intact")
	assert.Equal(t, "succeeded", e.promptState("a", pid))
	st = h.Stats()
	assert.Equal(t, 2, st.Instances)
	assert.Equal(t, int64(3), st.CapEvictions)
	assert.Zero(t, st.CapRefusals)
}

// When every open tree is busy (a turn runs in it) a tree that is not
// open is refused, created or read, with ErrTooManyOpen (503 unavailable
// with Retry-After); open trees still serve. Once a turn ends, its tree
// makes room.
func TestCapRefusesWhenEveryOpenTreeIsBusy(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour) // no wake-up fires during the test
	h := e.open(withCap(e.config(), 2, nil))
	e.tree(h, "old")
	e.clock.Advance(time.Millisecond)
	a := e.tree(h, "a")
	admit(t, a, "a", "hold")
	e.d.next(t)
	e.clock.Advance(time.Millisecond)
	b := e.tree(h, "b") // closes old
	admit(t, b, "b", "hold")
	e.d.next(t)
	require.False(t, e.isOpen("old"))

	_, err := h.Create(ctx, "c", "alice", nil)
	require.ErrorIs(t, err, host.ErrTooManyOpen)
	assert.Equal(t, http.StatusServiceUnavailable, api.StatusOf(err))
	_, _, err = h.Get(ctx, "old")
	require.ErrorIs(t, err, host.ErrTooManyOpen)
	_, _, err = h.Get(ctx, "a")
	require.NoError(t, err, "an open tree still serves")

	base := apiServer(t, h, false)
	resp := post(t, base+"/v1/sessions", "alice-token")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	a503 := call(t, base, "POST", "/v1/sessions", "alice-token", `{}`)
	assert.Equal(t, string(api.ErrUnavailable), a503.Type)
	st := h.Stats()
	assert.Equal(t, 2, st.Instances)
	assert.Equal(t, int64(4), st.CapRefusals)
	assert.Equal(t, 3, len(rootIDsOf(t, h)), "nothing refused was created")

	e.d.Release()
	idle(t, a)
	idle(t, b)
	e.tree(h, "c")
	_, _, err = h.Get(ctx, "old")
	require.NoError(t, err)
	assert.Equal(t, 2, h.Stats().Instances)
}

// A tree some request still uses (the context of its Get is live) is
// never closed for the cap; once the request ends, it is.
func TestCapSparesTreeWithRequestInFlight(t *testing.T) {
	e := newEnv(t)
	released := make(chan string, 16)
	h := e.open(withCap(e.config(), 1, released))
	e.tree(h, "a")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, _, err := h.Get(rctx, "a")
	require.NoError(t, err)
	e.clock.Advance(time.Hour)

	_, err = h.Create(ctx, "b", "alice", nil)
	require.ErrorIs(t, err, host.ErrTooManyOpen)
	assert.Zero(t, h.EvictIdle(ctx), "idle eviction spares it too")
	assert.True(t, e.isOpen("a"))

	cancel()
	waitReleased(t, released, "a")
	e.tree(h, "b")
	assert.False(t, e.isOpen("a"))
	assert.Equal(t, int64(1), h.Stats().CapEvictions)
}

// A tree closed for the cap while a turn holds its claim (its execution
// died) keeps its wake-up row: the wake-up boots it again, closing
// another tree for room, and the turn resumes and finishes (DESIGN §4).
func TestCapClosedTreeWithClaimResumesByItsWakeup(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	h := e.open(withCap(e.config(), 2, nil))
	c := e.tree(h, "claimed")
	pid := admit(t, c, "claimed", "die once")
	e.d.next(t)
	idle(t, c)
	e.clock.Advance(time.Millisecond)
	e.tree(h, "b")
	e.clock.Advance(time.Millisecond)
	e.tree(h, "c") // closes claimed, the least recently used

	require.False(t, e.isOpen("claimed"))
	assert.Equal(t, int64(1), h.Stats().CapEvictions)
	assert.Equal(t, treeStart(time.Hour), e.wakeups()["claimed"], "closing keeps the wake-up row")
	assert.True(t, e.claimed("claimed", "claimed"), "and the claim")

	e.clock.Set(treeStart(time.Hour))
	x := e.d.next(t) // booted by the wake-up, resumed by its sweep
	assert.Equal(t, pid, x.PromptID())
	assert.Equal(t, event.CauseResume, x.Cause())
	require.NoError(t, e.nextDelivery().err)
	assert.False(t, e.isOpen("b"), "closed to make room for the wake-up's boot")
	inst, _, err := h.Get(ctx, "claimed")
	require.NoError(t, err)
	idle(t, inst)
	assert.Equal(t, "succeeded", e.promptState("claimed", pid))
	assert.Equal(t, int64(2), h.Stats().CapEvictions)
}

// A tree only its wake-up opened was not used by any client: at the cap
// it is closed before a tree a client used, even one used before the
// wake-up came.
func TestCapClosesTreeOnlyAWakeupOpenedFirst(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	h := e.open(withCap(e.config(), 2, nil))
	c := e.tree(h, "claimed")
	admit(t, c, "claimed", "die once")
	e.d.next(t)
	idle(t, c)
	e.clock.Advance(time.Millisecond)
	e.tree(h, "used")
	e.clock.Advance(time.Millisecond)
	e.tree(h, "other") // closes claimed
	require.False(t, e.isOpen("claimed"))
	e.clock.Advance(time.Millisecond)
	_, _, err := h.Get(ctx, "used")
	require.NoError(t, err)

	e.clock.Set(treeStart(time.Hour))
	e.d.next(t) // booted by the wake-up (closing other), resumed by its sweep
	require.NoError(t, e.nextDelivery().err)
	require.False(t, e.isOpen("other"))
	inst := h.OpenInstance("claimed")
	require.NotNil(t, inst)
	idle(t, inst)

	e.clock.Advance(time.Millisecond)
	e.tree(h, "new")
	assert.False(t, e.isOpen("claimed"), "the tree no client used is closed for room")
	assert.True(t, e.isOpen("used"), "the tree a client used stays")
}

// A tree closed for the cap while its turn is parked on a question is
// answered after it is opened again, and the turn goes on from there.
func TestCapClosedParkedTreeAnswersAfterReopening(t *testing.T) {
	e := newEnv(t)
	h := e.open(withCap(e.config(), 1, nil))
	p := e.tree(h, "p")
	pid := admit(t, p, "p", "park once")
	e.d.next(t)
	idle(t, p)
	qs, err := p.Blockers(ctx, "p", event.KindQuestion)
	require.NoError(t, err)
	require.Len(t, qs, 1, "parked on its question")

	e.clock.Advance(time.Millisecond)
	e.tree(h, "other")
	require.False(t, e.isOpen("p"))

	e.clock.Advance(time.Millisecond)
	p2, _, err := h.Get(ctx, "p")
	require.NoError(t, err)
	assert.False(t, e.isOpen("other"))
	_, err = p2.Reply(ctx, "p", questionID(pid), core.Reply{ResponseID: "r1", Answers: [][]string{{"blue"}}})
	require.NoError(t, err)
	x := e.d.next(t)
	assert.Equal(t, pid, x.PromptID())
	idle(t, p2)
	assert.Equal(t, "succeeded", e.promptState("p", pid))
}

// Over HTTP, in process and in guest mode alike: a tree with an open
// event stream is not closed for the cap, so a create at the cap is 503
// unavailable with Retry-After; once the stream ends the create closes
// that tree, which reads back intact when asked for again.
func TestCapOverHTTP(t *testing.T) {
	inBothModes(t, func(t *testing.T, e *env, cfg host.Config, guest bool) {
		released := make(chan string, 64)
		h := e.open(withCap(cfg, 1, released))
		base := apiServer(t, h, guest)
		a := create(t, base)

		endStream := openStream(t, base, a)
		defer endStream()

		resp := post(t, base+"/v1/sessions", "alice-token")
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "5", resp.Header.Get("Retry-After"))
		refused := call(t, base, "POST", "/v1/sessions", "alice-token", `{}`)
		assert.Equal(t, string(api.ErrUnavailable), refused.Type)
		assert.True(t, e.isOpen(a), "the watched tree stays open")

		endStream()
		waitReleased(t, released, a)
		b := create(t, base)
		assert.False(t, e.isOpen(a))
		got := call(t, base, "GET", "/v1/sessions/"+a, "alice-token", "")
		require.Equal(t, http.StatusOK, got.Status)
		assert.Equal(t, a, got.Body["id"])
		assert.False(t, e.isOpen(b))
		st := h.Stats()
		assert.Equal(t, int64(2), st.CapEvictions)
		assert.Equal(t, int64(2), st.CapRefusals)
	})
}

// A turn parked on a question in a guest tree closed for the cap goes on
// once the question is answered after the tree is opened again.
func TestCapGuestParkedTreeAnswersAfterReopening(t *testing.T) {
	e := newEnv(t)
	released := make(chan string, 64)
	h := e.open(withCap(e.guestConfig(), 1, released))
	base := apiServer(t, h, true)
	p := create(t, base)
	a := call(t, base, "POST", "/v1/sessions/"+p+"/prompt", "alice-token", `{"text":"/ask which colour?"}`)
	require.Equal(t, http.StatusAccepted, a.Status)
	waitReleased(t, released, p)
	follow(t, base, p, string(event.StepParked))
	waitReleased(t, released, p) // the stream's request ended

	create(t, base) // closes p
	require.False(t, e.isOpen(p))
	assert.Equal(t, int64(1), h.Stats().CapEvictions)

	qs := call(t, base, "GET", "/v1/sessions/"+p+"/questions", "alice-token", "")
	require.Equal(t, http.StatusOK, qs.Status, qs.raw)
	list, _ := qs.Body["questions"].([]any)
	require.Len(t, list, 1, qs.raw)
	qid := list[0].(map[string]any)["id"].(string)
	r := call(t, base, "POST", "/v1/sessions/"+p+"/questions/"+qid, "alice-token", `{"answers":[["blue"]],"response_id":"r1"}`)
	require.Equal(t, http.StatusOK, r.Status, r.raw)
	follow(t, base, p, "session.execution.succeeded@1")
}

// post sends a create ({}) and returns the response, its body read.
func post(t *testing.T, url, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp
}

// rootIDsOf lists the trees of the index.
func rootIDsOf(t *testing.T, h *host.Host) []string {
	t.Helper()
	trees, _, err := h.List(ctx, "alice", "", 100)
	require.NoError(t, err)
	return rootIDs(trees)
}

// Concurrent opens at the cap never leave more trees open than the cap:
// each either opens its tree (closing another) or is refused with
// ErrTooManyOpen, and none hangs.
func TestCapHoldsUnderConcurrentOpens(t *testing.T) {
	e := newEnv(t)
	const most, trees, workers = 3, 8, 8
	h := e.open(withCap(e.config(), most, nil))
	for i := range trees {
		e.tree(h, treeName(i))
	}
	stop := make(chan struct{})
	watched := make(chan int)
	go func() {
		seen := 0
		for {
			select {
			case <-stop:
				watched <- seen
				return
			default:
			}
			seen = max(seen, h.Stats().Instances)
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range 40 {
				rctx, cancel := context.WithCancel(ctx)
				_, _, err := h.Get(rctx, treeName((w+i)%trees))
				if err != nil {
					assert.ErrorIs(t, err, host.ErrTooManyOpen)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(stop)
	assert.LessOrEqual(t, <-watched, most)
	st := h.Stats()
	assert.LessOrEqual(t, st.Instances, most)
	assert.Positive(t, st.CapEvictions)
}

func treeName(i int) string { return "t" + strconv.Itoa(i) }

// A wake-up whose tree cannot be opened because every open tree is in use
// is refused like any open, keeps its row and is retried with backoff;
// once room can be made, the retry boots the tree and its turn resumes.
func TestCapRefusedWakeupRetries(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	released := make(chan string, 16)
	h := e.open(withCap(e.config(), 1, released))
	c := e.tree(h, "claimed")
	pid := admit(t, c, "claimed", "die once")
	e.d.next(t)
	idle(t, c)
	e.clock.Advance(time.Millisecond)
	e.tree(h, "other") // closes claimed
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, _, err := h.Get(rctx, "other") // in use until cancel
	require.NoError(t, err)

	e.clock.Set(treeStart(time.Hour))
	d := e.nextDelivery()
	assert.Equal(t, "claimed", d.id)
	require.ErrorIs(t, d.err, host.ErrTooManyOpen)
	assert.Equal(t, treeStart(time.Hour), e.wakeups()["claimed"], "the refused wake-up keeps its row")
	assert.True(t, e.isOpen("other"))

	cancel()
	waitReleased(t, released, "other")
	e.clock.Advance(time.Minute) // past the retry's backoff
	x := e.d.next(t)
	assert.Equal(t, pid, x.PromptID())
	assert.Equal(t, event.CauseResume, x.Cause())
	require.NoError(t, e.nextDelivery().err)
	inst, _, err := h.Get(ctx, "claimed")
	require.NoError(t, err)
	idle(t, inst)
	assert.Equal(t, "succeeded", e.promptState("claimed", pid))
	assert.False(t, e.isOpen("other"))
}

// A wake-up delivered to an open tree holds it in use while the sweep
// runs: making room for another tree at the cap does not close it under
// the sweep (the opener is refused instead), and the delivery succeeds.
func TestCapSparesTreeWhileItsWakeupSweeps(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	sweeping, resume := make(chan struct{}), make(chan struct{})
	cfg := host.WithWakingHook(withCap(e.config(), 1, nil), func(id string) {
		close(sweeping)
		<-resume
	})
	h := e.open(cfg)
	var once sync.Once
	release := func() { once.Do(func() { close(resume) }) }
	t.Cleanup(release) // before the host's Close, which waits for the delivery
	c := e.tree(h, "claimed")
	pid := admit(t, c, "claimed", "die once")
	e.d.next(t)
	idle(t, c) // the claim stays, no execution runs: the instance is idle

	e.clock.Set(treeStart(time.Hour))
	select {
	case <-sweeping:
	case <-time.After(30 * time.Second):
		t.Fatal("the wake-up was not delivered")
	}
	_, err := h.Create(ctx, "other", "alice", nil)
	require.ErrorIs(t, err, host.ErrTooManyOpen, "the tree being swept is in use")
	assert.True(t, e.isOpen("claimed"))
	assert.Zero(t, h.Stats().CapEvictions)

	release()
	x := e.d.next(t)
	assert.Equal(t, pid, x.PromptID())
	assert.Equal(t, event.CauseResume, x.Cause())
	require.NoError(t, e.nextDelivery().err)
	idle(t, c)
	assert.Equal(t, "succeeded", e.promptState("claimed", pid))
}

// During a flood of refusals at the cap the host logs one Info line per
// host.CapRefusalLogEvery (by the host clock), not one per request.
func TestCapRefusalsLogSparingly(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	var mu sync.Mutex
	var buf strings.Builder
	cfg := withCap(e.config(), 1, nil)
	cfg.Log = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := e.open(cfg)
	a := e.tree(h, "a")
	admit(t, a, "a", "hold")
	e.d.next(t)
	infoLines := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(buf.String(), "open tree refused")
	}

	for range 3 {
		_, err := h.Create(ctx, "b", "alice", nil)
		require.ErrorIs(t, err, host.ErrTooManyOpen)
	}
	assert.Equal(t, 1, infoLines(), "one line for the first refusal, none for the next")
	e.clock.Advance(host.CapRefusalLogEvery)
	_, err := h.Create(ctx, "b", "alice", nil)
	require.ErrorIs(t, err, host.ErrTooManyOpen)
	assert.Equal(t, 2, infoLines(), "the next span's first refusal is logged")
	assert.Equal(t, int64(4), h.Stats().CapRefusals)
	e.d.Release()
	idle(t, a)
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A tree being deleted while it is not open takes no room under the cap:
// a concurrent open neither closes an idle tree nor is refused for it.
func TestCapDeleteOfClosedTreeTakesNoRoom(t *testing.T) {
	e := newEnv(t)
	deleting, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(resume) }) }
	cfg := host.WithDeleteFault(withCap(e.config(), 2, nil), func(id string) error {
		if id == "gone" {
			close(deleting)
			<-resume
		}
		return nil
	})
	h := e.open(cfg)
	t.Cleanup(release)
	e.tree(h, "gone")
	e.clock.Advance(time.Minute) // the idle timeout
	require.Equal(t, 1, h.EvictIdle(ctx))
	e.tree(h, "a")
	require.False(t, e.isOpen("gone"))

	done := make(chan error, 1)
	go func() { done <- h.Delete(ctx, "gone") }()
	select {
	case <-deleting:
	case <-time.After(30 * time.Second):
		t.Fatal("the delete did not start")
	}
	e.tree(h, "b")
	assert.Zero(t, h.Stats().CapEvictions, "no tree was closed for the delete's entry")
	assert.True(t, e.isOpen("a"))
	assert.True(t, e.isOpen("b"))

	release()
	require.NoError(t, <-done)
	assert.ElementsMatch(t, []string{"a", "b"}, rootIDsOf(t, h))

	// Its entry gone with it, the cap counts the open trees again: a third
	// closes the least recently used.
	e.tree(h, "c")
	assert.Equal(t, int64(1), h.Stats().CapEvictions)
	assert.Equal(t, 2, h.Stats().Instances)
}

// At the cap, a create with a bad body or a model not allowed is 400 in
// both modes, as below it: the request is checked before a tree is opened
// for it, so it is neither refused 503 while every tree is in use nor
// closes an idle tree for nothing.
func TestCapBadCreateIsInvalidNotUnavailable(t *testing.T) {
	inBothModes(t, func(t *testing.T, e *env, cfg host.Config, guest bool) {
		released := make(chan string, 64)
		h := e.open(withCap(cfg, 1, released))
		base := apiServerWith(t, h, guest, api.NewConfig().WithAllowedModels([]string{"offline"}))
		a := create(t, base)
		bad := []string{`{"nope":1}`, `not json`, `{"config":{"model":"gpt-other"}}`}

		// a is idle: a bad create closes nothing.
		for _, body := range bad {
			got := call(t, base, "POST", "/v1/sessions", "alice-token", body)
			assert.Equal(t, http.StatusBadRequest, got.Status, "%s: %s", body, got.raw)
		}
		assert.True(t, e.isOpen(a))

		// a is in use (an event stream): a bad create is still 400.
		endStream := openStream(t, base, a)
		defer endStream()
		for _, body := range bad {
			got := call(t, base, "POST", "/v1/sessions", "alice-token", body)
			assert.Equal(t, http.StatusBadRequest, got.Status, "%s: %s", body, got.raw)
			assert.NotEqual(t, string(api.ErrUnavailable), got.Type, body)
		}
		st := h.Stats()
		assert.Zero(t, st.CapEvictions)
		assert.Zero(t, st.CapRefusals)
		assert.Equal(t, []string{a}, rootIDsOf(t, h))
	})
}
