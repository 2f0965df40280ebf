//go:build js && wasm

package durableobject

import (
	"context"
	"sync"
	"syscall/js"
	"time"
)

// A streamed answer (SSE) goes to the client through a TransformStream
// and, on workerd, through the front Worker and the runtime's own pumps:
// every chunk costs the isolate time, and a turn streams a dozen events
// or more. So chunks are coalesced, without holding any back while the
// stream is idle:
//   - writes are buffered until Flush, so an event's lines are one chunk;
//   - a Flush sends from a goroutine of its own (sendSoon), which runs
//     once the handler's goroutine blocks: every event it had ready (the
//     events of one commit) leaves as one chunk;
//   - while the stream has not taken the last chunk (writer.desiredSize
//     ≤ 0), what is flushed waits for writer.ready and then leaves as one
//     chunk.
//
// The promises' callbacks are package-level functions bound to the
// stream's id (Function.prototype.bind) once per stream, not a js.Func per
// stream: a stream's promises may settle after its answer ended, so a
// per-stream function could never be released (one leaked per streamed
// answer).

// maxUnflushed is what Write buffers between Flushes before it sends
// (or, while the stream is busy, queues) a chunk of its own.
const maxUnflushed = 32 << 10

// A client that stops reading must not make the object hold every later
// event for it. The backlog is what was sent and not yet taken (write
// promises not settled) plus what waits to be sent; past maxBacklog, and
// with nothing taken for backlogPatience, the stream is aborted and the
// client, reconnecting with Last-Event-ID, catches up from the log. Both
// conditions, because a healthy stream's backlog passes maxBacklog
// within one synchronous burst (a catch-up page of the log is written
// before JS can take a chunk; Date.now does not move meanwhile), and a
// slow but reading client keeps taking chunks.
const (
	maxBacklog      = 1 << 20
	backlogPatience = 10 * time.Second
)

// now is the clock the backlog rule reads (a test sets it).
var now = time.Now

// stream is a responseWriter's streaming state, under its mu.
type stream struct {
	writer  js.Value      // the stream's writer once streaming
	id      int           // its key in streams
	broken  js.Value      // streamBroken bound to id
	ready   js.Value      // streamReady bound to id
	closed  bool          // the client went away
	ended   bool          // closed or aborted by this side
	queued  bool          // the sender was woken and has not run yet
	kick    chan struct{} // wakes the sender (sendSoon); closed by end
	waiting bool          // flushed bytes wait for writer.ready
	// unacked is what was sent and not yet taken (its write promise not
	// settled), sent the sizes of those chunks, oldest first (a stream
	// settles its writes in order); took is when the stream last took a
	// chunk, or was last caught up (the backlog rule).
	unacked int
	sent    []int
	took    time.Time
	written js.Value // streamWritten bound to id
	// progress, when a Drain waits, is closed (and cleared) when a chunk
	// is taken or the stream ends (signal).
	progress chan struct{}
}

var (
	streamsMu  sync.Mutex
	streams    = map[int]*responseWriter{}
	lastStream int

	// streamBroken: a write, the stream or ready failed: the client
	// went away.
	streamBroken = js.FuncOf(func(_ js.Value, args []js.Value) any {
		if w := streamOf(args); w != nil {
			w.gone()
		}
		return nil
	})
	// streamWritten: the oldest chunk sent was taken.
	streamWritten = js.FuncOf(func(_ js.Value, args []js.Value) any {
		if w := streamOf(args); w != nil {
			w.mu.Lock()
			if len(w.sent) > 0 {
				w.unacked -= w.sent[0]
				w.sent = w.sent[1:]
			}
			w.took = now()
			w.signal()
			w.mu.Unlock()
		}
		return nil
	})
	// streamReady: the stream took its chunks: send what waited, as one
	// chunk, whatever desiredSize says now. Checking it again (push) could
	// spin: a stream whose reader went away unnoticed (wrangler dev does
	// not pass a client's disconnect on) keeps desiredSize at 0 with ready
	// already resolved, and ready.then → push → ready.then … is a
	// microtask loop that never yields the isolate: every object and the
	// front stopped answering (TestWorkerdStaleStreams).
	streamReady = js.FuncOf(func(_ js.Value, args []js.Value) any {
		if w := streamOf(args); w != nil {
			w.mu.Lock()
			w.waiting = false
			if !w.closed && !w.ended && w.buf.Len() > 0 && !w.abandonIfStalled() {
				w.send(w.buf.Bytes())
				w.buf.Reset()
			}
			w.mu.Unlock()
		}
		return nil
	})
)

// streamOf is the writer whose id a bound callback got first.
func streamOf(args []js.Value) *responseWriter {
	if len(args) == 0 || args[0].Type() != js.TypeNumber {
		return nil
	}
	streamsMu.Lock()
	defer streamsMu.Unlock()
	return streams[args[0].Int()]
}

// open makes w a stream on writer. Under w.mu.
func (w *responseWriter) open(writer js.Value) {
	streamsMu.Lock()
	lastStream++
	w.id = lastStream
	streams[w.id] = w
	streamsMu.Unlock()
	w.writer = writer
	w.broken = streamBroken.Call("bind", js.Null(), w.id)
	w.ready = streamReady.Call("bind", js.Null(), w.id)
	w.written = streamWritten.Call("bind", js.Null(), w.id)
	w.writer.Get("closed").Call("catch", w.broken)
	w.kick = make(chan struct{}, 1)
	go w.sender(w.kick)
}

func (w *responseWriter) streaming() bool { return w.writer.Truthy() }

// sendSoon sends what was flushed once the handler's goroutine blocks:
// it wakes the stream's sender, which runs only then. Under w.mu.
func (w *responseWriter) sendSoon() {
	if w.queued || w.ended || w.buf.Len() == 0 {
		return
	}
	w.queued = true
	w.kick <- struct{}{} // never blocks: queued says the one slot is free
}

// sender is a stream's goroutine that sends what was flushed, one per
// stream rather than one per Flush: a new goroutine per streamed event
// (and its stack growing into the JS calls) was a visible part of each
// chunk's cost. It ends when the stream does (end closes kick).
func (w *responseWriter) sender(kick <-chan struct{}) {
	for range kick {
		w.mu.Lock()
		w.queued = false
		w.push()
		w.mu.Unlock()
	}
}

// push sends the buffered bytes as one chunk if the stream took the last
// one, else once it does (writer.ready). Under w.mu.
func (w *responseWriter) push() {
	if w.closed || w.ended || w.waiting || w.buf.Len() == 0 {
		return
	}
	if d := w.writer.Get("desiredSize"); d.Type() == js.TypeNumber && d.Float() > 0 {
		w.send(w.buf.Bytes())
		w.buf.Reset()
		return
	}
	w.waiting = true
	w.writer.Get("ready").Call("then", w.ready, w.broken)
}

// send writes one chunk. The write's promise is not awaited (Write must
// not wait on the event loop); its settling is counted (streamWritten)
// and its failure handled, never left unhandled. Under w.mu.
func (w *responseWriter) send(p []byte) {
	u := jsUint8Array.New(len(p))
	js.CopyBytesToJS(u, p)
	if w.unacked == 0 {
		w.took = now() // caught up until now
	}
	w.unacked += len(p)
	w.sent = append(w.sent, len(p))
	w.writer.Call("write", u).Call("then", w.written, w.broken)
}

// abandonIfStalled aborts the stream when its client stopped reading (the
// backlog rule above): it reports whether it did, having cancelled the
// request's context. Under w.mu.
func (w *responseWriter) abandonIfStalled() bool {
	if w.unacked+w.buf.Len() <= maxBacklog || now().Sub(w.took) < backlogPatience {
		return false
	}
	w.buf.Reset()
	w.end(true)
	w.cancel()
	return true
}

// gone marks the client gone and cancels the request's context.
func (w *responseWriter) gone() {
	w.mu.Lock()
	w.closed = true
	w.signal()
	w.mu.Unlock()
	w.cancel()
}

// signal wakes a Drain that waits. Under w.mu.
func (w *responseWriter) signal() {
	if w.progress != nil {
		close(w.progress)
		w.progress = nil
	}
}

// Drain waits until the client took every chunk flushed so far
// (httpmsg.Drainer): an event stream's catch-up reads its next page of
// the log only then, so the object holds a page of it, never the whole
// log. Waiting blocks the handler's goroutine, which lets the isolate run
// the stream. It gives up, as the backlog rule does, once nothing was
// taken for backlogPatience: with the backlog past maxBacklog the stream
// is aborted (errBacklog); under it Drain returns, and the writes that
// follow meet the rule in Write.
func (w *responseWriter) Drain(ctx context.Context) error {
	for {
		w.mu.Lock()
		switch {
		case w.closed || w.ended:
			w.mu.Unlock()
			return context.Canceled
		case !w.streaming() || w.unacked+w.buf.Len() == 0:
			w.mu.Unlock()
			return nil
		}
		wait := backlogPatience - now().Sub(w.took)
		if wait <= 0 {
			stalled := w.abandonIfStalled()
			w.mu.Unlock()
			if stalled {
				return errBacklog
			}
			return nil
		}
		if w.progress == nil {
			w.progress = make(chan struct{})
		}
		progress := w.progress
		w.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-progress:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
		timer.Stop()
	}
}

// end closes the stream after what is buffered (abort: errors it
// instead) and forgets it. Under w.mu.
func (w *responseWriter) end(abort bool) {
	if !w.closed && !w.ended {
		switch {
		case abort:
			w.writer.Call("abort", jsError.New("internal error")).Call("catch", w.broken)
		default:
			if w.buf.Len() > 0 {
				w.send(w.buf.Bytes()) // queued after any chunk still waiting
				w.buf.Reset()
			}
			w.writer.Call("close").Call("catch", w.broken)
		}
	}
	if !w.ended && w.kick != nil {
		close(w.kick) // the sender ends
	}
	w.ended = true
	w.signal()
	streamsMu.Lock()
	delete(streams, w.id)
	streamsMu.Unlock()
}
