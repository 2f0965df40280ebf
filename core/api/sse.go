package api

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// subscriptionBuffer is how many events a stream may fall behind before its
// subscription is dropped and it catches up from the log instead.
const subscriptionBuffer = 1024

// streamHeaders sets the headers of an event stream, for a GET and a HEAD
// alike: no proxy may cache or buffer it. no-store, not no-cache (which
// lets a cache keep a copy it revalidates): the stream is a transcript,
// and its URL may hold an access_token.
func streamHeaders(w httpmsg.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
}

// events serves the session's events as Server-Sent Events: the durable
// events after the cursor (?after= or Last-Event-ID, which wins; a cursor
// past the session's last event is refused, checkCursor), then live
// events and deltas. Durable events carry `id: <seq>` and are sent exactly
// once and in order: the stream subscribes before it reads the log, skips
// what it already sent, and re-reads the log whenever live delivery shows a
// gap or falls behind, and follows the tree to its next instance when the
// one it subscribed to stops. Deltas carry no id. A ":" heartbeat comment is
// sent every heartbeat interval.
func (h *TreeHandler) events(w httpmsg.ResponseWriter, r *httpmsg.Request, t *Tree) error {
	inst, id := t.Instance, r.PathValue("id")
	cursor, name := r.URL.Query().Get("after"), "after"
	if len(r.Header.Values("Last-Event-ID")) > 1 {
		// Which one would count is a guess (Cloudflare joins them into one
		// value, which then fails): refuse, as a query parameter or a JSON
		// field given twice is.
		return fail(ErrInvalidRequest, "Last-Event-ID is given more than once; give it once")
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		cursor, name = last, "Last-Event-ID" // the error names where the bad value came from
	}
	after, err := int64Param(cursor, name)
	if err != nil {
		return err
	}
	if _, err := inst.Session(r.Context(), id); err != nil {
		return err
	}
	if err := checkCursor(r.Context(), inst, id, after, name); err != nil {
		return err
	}
	if r.Method == httpmsg.MethodHead {
		// The headers a GET would send, and no stream: a HEAD has no body.
		streamHeaders(w)
		w.WriteHeader(httpmsg.StatusOK)
		return nil
	}
	flusher, ok := streamFlusher(w)
	if !ok {
		return fail(ErrInternal, "streaming is not supported by this server")
	}
	evicted, release := h.openStream(t.RootID)
	defer release()
	s := &stream{w: w, flush: flusher.Flush, inst: inst, id: id, last: after}
	if d, ok := w.(httpmsg.Drainer); ok {
		s.drain = d.Drain
	}
	sub := inst.Subscribe(id, subscriptionBuffer)
	defer func() { sub.Close() }()

	streamHeaders(w)
	w.WriteHeader(httpmsg.StatusOK)
	if err := s.catchUp(r); err != nil {
		// A catch-up cut short because the client went away, or its host
		// ended the stream (a backlog cut), is routine: not worth a warning.
		if r.Context().Err() == nil {
			h.log.Warn("event stream: read log", "session", id, "err", err)
		}
		return nil
	}
	beat := make(chan struct{}, 1)
	arm := func() func() bool {
		return h.deps.Clock.AfterFunc(h.cfg.heartbeat, func() {
			select {
			case beat <- struct{}{}:
			default:
			}
		})
	}
	stop := arm()
	defer func() { stop() }()
	for {
		select {
		case ev, open := <-sub.C:
			if !open {
				// Fell behind, or the instance stopped (idle eviction, a
				// restart of the tree): find the tree's current instance,
				// subscribe again and catch up from the log.
				if s.inst.Closed() {
					if t.Next == nil {
						return nil // the tree runs no other instance
					}
					next, err := t.Next(r.Context())
					if err != nil || next.Closed() {
						// Deleted, the host is stopping, or the tree has no
						// other instance yet (a wasm guest whose delete
						// failed, until its wake-up reopens it): subscribing
						// to a closed instance ends at once, so going on
						// would spin here. The client reconnects.
						return nil
					}
					s.inst = next
				}
				sub = s.inst.Subscribe(id, subscriptionBuffer)
				if err := s.catchUp(r); err != nil {
					return nil
				}
				continue
			}
			if err := s.live(r, ev); err != nil {
				return nil
			}
		case <-beat:
			if _, err := fmt.Fprint(w, ":\n\n"); err != nil {
				return nil
			}
			s.flush()
			stop = arm()
		case <-r.Context().Done():
			return nil
		case <-h.closing:
			return nil
		case <-evicted:
			return nil // a newer stream of the tree took its place
		}
	}
}

// checkCursor refuses a cursor past the session's last event: the stream
// skips every event up to it, and seqs are never reused, so it would look
// alive and never send a stored event. A cursor names an event the client
// received, which exists. The check reads the event at the cursor (one
// row, wherever the log is long); nothing at it or after it means none
// was ever stored.
func checkCursor(ctx context.Context, inst *core.Instance, id string, after int64, name string) error {
	if after == 0 {
		return nil
	}
	evs, _, err := inst.EventPage(ctx, id, after-1, 1, 1)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return fail(ErrInvalidRequest, fmt.Sprintf("%s %d is past the session's last event: the session has no event %d; give the id of the last event received, or 0 for the whole log", name, after, after))
	}
	return nil
}

// openStream registers one more event stream on tree root. Past the
// tree's limit the oldest stream is ended to make room (evicted closes):
// a stream's end is routine (its client reconnects with Last-Event-ID),
// and a client that left without its host noticing (wrangler dev does not
// pass a disconnect on to a Durable Object) would otherwise hold its place
// for good. release unregisters it.
func (h *TreeHandler) openStream(root string) (evicted <-chan struct{}, release func()) {
	h.streamsMu.Lock()
	defer h.streamsMu.Unlock()
	open := h.streams[root]
	if len(open) >= h.cfg.streamLimit {
		close(open[0])
		open = open[1:]
	}
	mine := make(chan struct{})
	h.streams[root] = append(open, mine)
	return mine, func() {
		h.streamsMu.Lock()
		defer h.streamsMu.Unlock()
		open := slices.DeleteFunc(h.streams[root], func(c chan struct{}) bool { return c == mine })
		if len(open) == 0 {
			delete(h.streams, root)
			return
		}
		h.streams[root] = open
	}
}

type stream struct {
	w     httpmsg.ResponseWriter
	flush func()
	drain func(context.Context) error // the writer's Drain, if it has one (httpmsg.Drainer)
	inst  *core.Instance
	id    string
	last  int64  // seq of the last durable event sent
	frame []byte // send's buffer
}

// catchUpPage and catchUpBytes bound one read of the log: at most
// catchUpPage events, with no more than catchUpBytes of data (one event at
// least, whatever its size). A log of large events (prompts of up to
// 256 KiB) is read, sent and flushed a page at a time, never held whole.
const (
	catchUpPage  = 500
	catchUpBytes = 1 << 20
)

// catchUp sends every durable event after last from the log, a page at a
// time: each page is flushed, and, on a writer that can say so
// (httpmsg.Drainer), taken by the client before the next is read.
func (s *stream) catchUp(r *httpmsg.Request) error {
	for {
		evs, more, err := s.inst.EventPage(r.Context(), s.id, s.last, catchUpPage, catchUpBytes)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := s.send(ev); err != nil {
				return err
			}
		}
		s.flush()
		if !more {
			return nil
		}
		if s.drain != nil {
			if err := s.drain(r.Context()); err != nil {
				return err
			}
		}
	}
}

// live sends one event from the subscription.
func (s *stream) live(r *httpmsg.Request, ev event.Event) error {
	switch {
	case ev.IsEphemeral():
		if err := s.send(ev); err != nil {
			return err
		}
	case ev.Seq <= s.last:
		return nil // already sent from the log
	case ev.Seq > s.last+1:
		return s.catchUp(r) // committed events published out of order
	default:
		if err := s.send(ev); err != nil {
			return err
		}
	}
	s.flush()
	return nil
}

// maxKeptFrame is the largest frame buffer a stream keeps between events.
const maxKeptFrame = 64 << 10

// send writes ev's frame in one Write, from one buffer the stream reuses
// (appendFrame: a delta's frame is the per-chunk cost of an answer).
func (s *stream) send(ev event.Event) error {
	frame, err := appendFrame(s.frame[:0], ev)
	if err != nil {
		return err
	}
	s.frame = frame
	if cap(frame) > maxKeptFrame {
		s.frame = nil // one large event does not hold its buffer for the stream's life
	}
	if _, err := s.w.Write(frame); err != nil {
		return err
	}
	if !ev.IsEphemeral() {
		s.last = ev.Seq
	}
	return nil
}

// root is the tree of a session id: the part before the first '.'.
func root(id string) string {
	r, _, _ := strings.Cut(id, ".")
	return r
}
