package api

import (
	"context"
	"fmt"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/digest"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// IdempotencyKeyHeader names a create's idempotency key (POST
// /v1/sessions). A header, not a body field: the body is the session's
// config, and may be empty.
const IdempotencyKeyHeader = "Idempotency-Key"

// MaxIdempotencyKeyLen bounds a create's key, in bytes.
const MaxIdempotencyKeyLen = 200

// CreateKey is a create's idempotency key, scoped to its principal, with
// the digest of the request's body: a retry must send the same bytes to
// be answered the first create's session.
type CreateKey struct {
	Key    string
	Digest string // hex SHA-256 of the request body, byte for byte
}

// ReadCreateKey reads a create's Idempotency-Key header: nil when there is
// none; 400 invalid_request when it is given twice, is empty, longer than
// MaxIdempotencyKeyLen or holds anything but printable ASCII. body is the
// request's body, whose digest the key records.
func ReadCreateKey(r *httpmsg.Request, body []byte) (*CreateKey, error) {
	return ParseCreateKey(r.Header.Values(IdempotencyKeyHeader), body)
}

// ParseCreateKey is ReadCreateKey for the header's values (a host that
// has them apart from their request: the Cloudflare front).
func ParseCreateKey(values []string, body []byte) (*CreateKey, error) {
	if len(values) == 0 {
		return nil, nil
	}
	if len(values) > 1 {
		return nil, fail(ErrInvalidRequest, IdempotencyKeyHeader+" is given more than once; give it once")
	}
	key := values[0]
	if !validCreateKey(key) {
		return nil, fail(ErrInvalidRequest, fmt.Sprintf("%s must be 1 to %d printable ASCII characters", IdempotencyKeyHeader, MaxIdempotencyKeyLen))
	}
	sum := digest.Sum256(body)
	return &CreateKey{Key: key, Digest: digest.Hex(sum[:])}, nil
}

func validCreateKey(key string) bool {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// KeyedIndex is an Index that keeps the principals' create keys: the
// local server's host. A one-tree host (a wasm guest, a Durable Object)
// is not one: the host in front of it keeps the directory, and the keys.
type KeyedIndex interface {
	Index
	// CreateKeyed is Create under key, which is principal's: when key
	// names no tree yet, it creates tree rootID and records key for it in
	// the same commit as the tree's index row, and returns rootID. When
	// key names a tree already (an earlier create, or one under way,
	// whose end it waits for), nothing is created: it returns that tree's
	// id if the digests match and the tree exists, KeyReused when the
	// digests differ, and KeySpent when that tree was deleted. A key
	// recorded by a create that failed (or died) goes with its tree.
	CreateKeyed(ctx context.Context, rootID, principal string, key CreateKey, init func(*core.Instance) error) (id string, err error)
}

// KeyReused is the answer to a create whose Idempotency-Key an earlier
// create of the principal used with another body (409 conflict).
func KeyReused(key string) error {
	return fail(ErrConflict, fmt.Sprintf("%s %q was used with a different request body", IdempotencyKeyHeader, core.Clip(key)))
}

// KeySpent is the answer to a create whose Idempotency-Key created a
// session since deleted (409 conflict): a key is never used again, so a
// late retry does not make a second tree.
func KeySpent(key, id string) error {
	return fail(ErrConflict, fmt.Sprintf("%s %q created session %s, since deleted", IdempotencyKeyHeader, core.Clip(key), core.Clip(id)))
}

// WriteCreated writes a create's 201: {"id": id}. A create replayed by
// its key is answered with it too, as the first was.
func WriteCreated(w httpmsg.ResponseWriter, id string) {
	writeJSON(w, httpmsg.StatusCreated, map[string]string{"id": id})
}
