package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
)

// NewSession describes a session to create.
type NewSession struct {
	// ID is the session id; empty mints one. A child's id is chosen by its
	// parent's task call so that a re-run call re-attaches to it.
	ID        string
	ParentID  string // empty for a root
	Principal string
	Config    json.RawMessage // per-session configuration, stored as given
}

// Session is a session's projected row.
type Session struct {
	ID        string
	ParentID  string
	RootID    string
	Principal string
	Config    json.RawMessage
	CreatedAt int64
	UpdatedAt int64
	Turns     int
}

// CreateSession records session.created. A root's tree is itself; a child
// joins its parent's tree and principal.
func (inst *Instance) CreateSession(ctx context.Context, ns NewSession) (Session, error) {
	if ns.Config == nil {
		ns.Config = json.RawMessage(`{}`)
	}
	if !json.Valid(ns.Config) {
		return Session{}, invalid("create session: config is not JSON")
	}
	var s Session
	err := inst.newWrite().run(ctx, func(t *txw) error {
		id := ns.ID
		if id == "" {
			id = t.id()
		}
		if strings.TrimSpace(id) == "" {
			return invalid("create session: empty id")
		}
		var exists bool
		if _, err := storage.QueryRow(t, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?)`, []any{id}, &exists); err != nil {
			return err
		}
		if exists {
			return &Error{Code: ErrConflict, Msg: "create session " + Clip(id) + ": already exists"}
		}
		root, principal := id, ns.Principal
		if ns.ParentID != "" {
			parent, err := t.session(ns.ParentID)
			if err != nil {
				return err
			}
			root, principal = parent.RootID, parent.Principal
		}
		if _, err := t.append(id, event.SessionCreated, event.Created{ParentID: ns.ParentID, RootID: root, Principal: principal, Config: ns.Config}); err != nil {
			return err
		}
		var err error
		s, err = t.session(id)
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("create session: %w", err)
	}
	return s, nil
}

// Session reads one session's row.
func (inst *Instance) Session(ctx context.Context, id string) (Session, error) {
	var s Session
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		var err error
		s, err = readSession(tx, id)
		return err
	})
	return s, err
}

func (t *txw) session(id string) (Session, error) { return readSession(t.Tx, id) }

func (t *txw) requireSession(id string) error {
	_, err := readSession(t.Tx, id)
	return err
}

func readSession(tx storage.Tx, id string) (Session, error) {
	var s Session
	var parent, config string
	found, err := storage.QueryRow(tx, `SELECT id, COALESCE(parent_id, ''), root_id, principal, config, created_at, updated_at, turns FROM sessions WHERE id = ?`,
		[]any{id}, &s.ID, &parent, &s.RootID, &s.Principal, &config, &s.CreatedAt, &s.UpdatedAt, &s.Turns)
	if err != nil {
		return s, fmt.Errorf("read session %s: %w", id, err)
	}
	if !found {
		return s, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	s.ParentID, s.Config = parent, json.RawMessage(config)
	return s, nil
}

// Events returns up to limit events of a session with seq > after, in order
// (limit 0: all).
func (inst *Instance) Events(ctx context.Context, sessionID string, after int64, limit int) ([]event.Event, error) {
	var out []event.Event
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		var err error
		out, err = ReadEvents(tx, sessionID, after, limit)
		return err
	})
	return out, err
}

// EventPage returns the events of a session with seq > after, in order: at
// most limit of them, and as many as fit maxBytes of data (one at least,
// whatever its size); more says later ones exist. A reader that pages
// through a log of large events (a prompt's text is up to 256 KiB) holds
// one page at a time.
func (inst *Instance) EventPage(ctx context.Context, sessionID string, after int64, limit, maxBytes int) (evs []event.Event, more bool, err error) {
	err = inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		evs, more, err = readEventPage(tx, sessionID, after, limit, maxBytes)
		return err
	})
	return evs, more, err
}

// readEventPage is EventPage in a transaction. It reads the sizes of the
// events first, which octet_length takes from each row's header without
// reading its data, then the page. The sizes are read in windows that
// grow (sizeWindow, then four times as many each time) until the page is
// full: a page of a few large events visits a few rows, not limit of them.
func readEventPage(tx storage.Tx, sessionID string, after int64, limit, maxBytes int) ([]event.Event, bool, error) {
	page := pageBudget{limit: limit, maxBytes: maxBytes}
	last, more, full := after, false, false
	for window := sizeWindow; !full; window *= 4 {
		want := min(window, limit+1-page.n)
		rows, err := tx.Query(`SELECT seq, octet_length(data) FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`, sessionID, last, want)
		if err != nil {
			return nil, false, fmt.Errorf("read events of %s: %w", sessionID, err)
		}
		got := 0
		for rows.Next() {
			var seq int64
			var size int
			if err := rows.Scan(&seq, &size); err != nil {
				return nil, false, err
			}
			got++
			if !page.take(size) {
				more, full = true, true
				break
			}
			last = seq
		}
		if got < want {
			full = true // the log ends
		}
	}
	if page.n == 0 {
		return nil, false, nil
	}
	evs, err := readEvents(tx, sessionID, `seq > ? AND seq <= ? ORDER BY seq`, after, last)
	return evs, more, err
}

// sizeWindow is how many events' sizes readEventPage reads first.
const sizeWindow = 4

// pageBudget is the rule of a page bounded in rows and bytes (an event
// page, a snapshot's messages): rows taken in order fit while the page
// holds fewer than limit and their data stays within maxBytes; the first
// one fits whatever its size, so a page is never empty while rows remain.
type pageBudget struct {
	limit, maxBytes int
	n, total        int // rows taken, and their bytes
}

// take reports whether a row of size bytes fits, counting it if it does.
func (b *pageBudget) take(size int) bool {
	if b.n == b.limit || (b.n > 0 && b.total+size > b.maxBytes) {
		return false
	}
	b.n, b.total = b.n+1, b.total+size
	return true
}

// ReadEvents reads a session's log inside a transaction.
func ReadEvents(tx storage.Tx, sessionID string, after int64, limit int) ([]event.Event, error) {
	if limit <= 0 {
		limit = -1
	}
	return readEvents(tx, sessionID, `seq > ? ORDER BY seq LIMIT ?`, after, limit)
}

// readEvents reads the session's events matching where (which may order
// and limit them too), its arguments after the session's id.
func readEvents(tx storage.Tx, sessionID, where string, args ...any) ([]event.Event, error) {
	rows, err := tx.Query(`SELECT id, seq, type, at, data FROM events WHERE session_id = ? AND `+where, append([]any{sessionID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", sessionID, err)
	}
	out := make([]event.Event, 0, rows.Len())
	for rows.Next() {
		ev := event.Event{SessionID: sessionID}
		var typ, data string
		if err := rows.Scan(&ev.ID, &ev.Seq, &typ, &ev.At, &data); err != nil {
			return nil, err
		}
		ev.Type, ev.Data = event.Type(typ), json.RawMessage(data)
		out = append(out, ev)
	}
	return out, nil
}
