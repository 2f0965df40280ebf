//go:build wasip1

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// clock is core.Clock over the clock and timer imports: AfterFunc sets a
// host timer, and the timer export runs f in its own goroutine. The guest
// never uses a Go runtime timer, which could only fire while some export
// happens to run.
type clock struct {
	mu     sync.Mutex
	next   uint64
	timers map[uint64]func()
}

var _ core.Clock = (*clock)(nil)

func (c *clock) Now() int64 { return hostClockNow() }

func (c *clock) AfterFunc(d time.Duration, f func()) func() bool {
	id := c.register(f)
	hostTimerSet(id, hostClockNow()+max(d.Milliseconds(), 0))
	return func() bool {
		pending := c.forget(id)
		if pending {
			hostTimerClear(id)
		}
		return pending
	}
}

// register gives f a timer id, which fire runs. It sets no host timer:
// AfterFunc sets one, and a drain part's answer fires the id on an event
// of the host's own.
func (c *clock) register(f func()) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.timers[c.next] = f
	return c.next
}

// forget drops timer id, reporting whether it was pending.
func (c *clock) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, pending := c.timers[id]
	delete(c.timers, id)
	return pending
}

// fire runs timer id's function, once; a stopped or unknown id is ignored.
func (c *clock) fire(id uint64) {
	c.mu.Lock()
	f, ok := c.timers[id]
	delete(c.timers, id)
	c.mu.Unlock()
	if ok {
		go f()
	}
}

// ids mints 128-bit ids from the random import: 26 lowercase base32
// characters, like the host's RandomIDs.
type ids struct{}

func (ids) NewID() string {
	var b [16]byte
	hostRandom(unsafe.Pointer(&b[0]), uint32(len(b)))
	return encodeID(b)
}

// idAlphabet is base32's standard alphabet (RFC 4648), lower case.
const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// encodeID is strings.ToLower of b in unpadded standard base32, written
// out: the encoding/base32 package cost the guest about 3 KB gzip.
// 128 bits are 25 characters of 5 bits and a last one of 3 bits shifted
// left by 2, as base32 pads a partial group with zero bits.
func encodeID(b [16]byte) string {
	var out [26]byte
	var acc, n uint // the low n bits of acc are not yet written
	j := 0
	for _, c := range b {
		acc, n = acc<<8|uint(c), n+8
		for n >= 5 {
			n -= 5
			out[j] = idAlphabet[acc>>n&31]
			j++
		}
	}
	out[j] = idAlphabet[acc<<(5-n)&31]
	return string(out[:])
}

// waker is core.Waker over the wake-up imports.
type waker struct{}

func (waker) Arm(_ context.Context, at int64) error { return armWake(at) }

// armWake asks the host to store the tree's wake-up. A failure carries the
// host's storage code, so core classifies it like any storage failure: a
// transient one fails the attempt of the write that armed, before its
// transaction, and the write schedule retries it (DESIGN §4 rule 1, §8).
// "Database closed" (the tree was deleted, or its host is stopping) is
// storage.ErrClosed, as in an SQL result (guestdb).
func armWake(at int64) error {
	switch code := hostWakeArm(at); int64(code) {
	case 0:
		return nil
	case abi.SQLCodeClosed:
		return fmt.Errorf("the host could not store the tree's wake-up: %w", storage.ErrClosed)
	default:
		return &storage.Error{Code: storage.Code(code), Msg: "the host could not store the tree's wake-up"}
	}
}

// logHandler sends records to the log import as one line of text, without
// a time (the host stamps its own), so logs repeat with the inputs.
type logHandler struct {
	attrs string
	level logs.Level
}

func (h logHandler) Enabled(_ context.Context, l logs.Level) bool { return l >= h.level }

func (h logHandler) Handle(_ context.Context, r logs.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a logs.Attr) bool {
		appendAttr(&b, a)
		return true
	})
	msg := []byte(b.String())
	p, n := bytesPtr(msg)
	hostLog(int32(r.Level), p, n)
	return nil
}

func (h logHandler) WithAttrs(as []logs.Attr) logs.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		appendAttr(&b, a)
	}
	return logHandler{attrs: b.String(), level: h.level}
}

// appendAttr writes " key=value", the value quoted (strconv.Quote) when
// it is empty or holds a space, '=', '"', a control character or any
// non-ASCII byte, so that a value from a request or a provider cannot pass
// for more attributes or another line. slog's text handler (and core/logs'
// copy of its rule, logs.appendText) quotes the same ASCII bytes but only
// non-printable runes; deciding that needs the unicode tables, which cost
// the guest about 3.8 KB gzip, so the guest quotes every non-ASCII value.
func appendAttr(b *strings.Builder, a logs.Attr) {
	v := a.Value.String()
	b.WriteByte(' ')
	b.WriteString(a.Key)
	b.WriteByte('=')
	if needsQuoting(v) {
		v = strconv.Quote(v)
	}
	b.WriteString(v)
}

func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == '=' || c == '"' || c >= 0x7f {
			return true
		}
	}
	return false
}

func (h logHandler) WithGroup(string) logs.Handler { return h }
