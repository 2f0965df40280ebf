package api

import (
	"crypto/subtle"
	"fmt"
	"strings"

	"github.com/revenantrt/revenant/core/digest"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// Authenticator names the principal a request acts for.
type Authenticator interface {
	// Authenticate returns the request's principal, or an error (answered
	// 401). queryToken allows ?access_token= (the event stream only:
	// EventSource cannot send headers).
	Authenticate(r *httpmsg.Request, queryToken bool) (string, error)
}

// Anonymous serves one principal to every request. The local server uses it
// only when no tokens are configured, and then binds loopback only.
type Anonymous struct{}

// AnonymousPrincipal is the principal of Anonymous.
const AnonymousPrincipal = "anonymous"

// Authenticate implements Authenticator.
func (Anonymous) Authenticate(*httpmsg.Request, bool) (string, error) { return AnonymousPrincipal, nil }

// Tokens maps bearer tokens to principals. Only SHA-256 hashes of the
// tokens are kept, and a presented token is compared with every hash in
// constant time.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	hash      [digest.Size]byte
	principal string
}

// emptyTokenHash is the SHA-256 of the empty string.
var emptyTokenHash = digest.Sum256(nil)

// ParseTokens reads REVENANT_TOKENS: comma-separated principal:token pairs,
// where token is either the secret itself or "sha256:" and its hex hash.
// Its errors name a malformed entry by its position only: the entry may be
// a bare token (or a piece of one cut at a comma), so no part of it is
// ever printed.
func ParseTokens(spec string) (*Tokens, error) {
	t := &Tokens{}
	for n, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		principal, secret, ok := strings.Cut(item, ":")
		if !ok || principal == "" || secret == "" {
			return nil, fmt.Errorf("REVENANT_TOKENS: entry %d (counting from 1, comma-separated) is not principal:token", n+1)
		}
		if strings.TrimSpace(principal) != principal || strings.TrimSpace(secret) != secret {
			// "alice : s3cret" would name the principal "alice " with the
			// token " s3cret", which no client can present: a header's
			// value loses the white space around it, and BearerToken the
			// spaces after the scheme. The server would start and refuse
			// that principal every request.
			return nil, fmt.Errorf("REVENANT_TOKENS: entry %d (counting from 1, comma-separated) has white space around its ':'; write principal:token", n+1)
		}
		if principal == AnonymousPrincipal {
			// The server without tokens serves every request as this
			// principal: a token's trees under the same name would be
			// open to anyone on loopback the day the tokens are dropped.
			return nil, fmt.Errorf("REVENANT_TOKENS: entry %d: the principal %q is reserved for a server without tokens; name it otherwise", n+1, principal)
		}
		var e tokenEntry
		e.principal = principal
		if hexHash, hashed := strings.CutPrefix(secret, "sha256:"); hashed {
			sum, ok := digest.ParseHex(hexHash)
			if !ok {
				return nil, fmt.Errorf("REVENANT_TOKENS: principal %q: sha256: needs 64 hex digits", principal)
			}
			if sum == emptyTokenHash {
				// An empty token is never accepted (Authenticate): the entry
				// would let its principal in with no token at all if it were.
				return nil, fmt.Errorf("REVENANT_TOKENS: principal %q: sha256: is the hash of an empty token", principal)
			}
			e.hash = sum
		} else {
			e.hash = digest.Sum256([]byte(secret))
		}
		for _, other := range t.entries {
			if other.hash == e.hash && other.principal != e.principal {
				return nil, fmt.Errorf("REVENANT_TOKENS: principals %q and %q share a token; each principal needs its own", other.principal, e.principal)
			}
		}
		t.entries = append(t.entries, e)
	}
	if len(t.entries) == 0 {
		return nil, fmt.Errorf("REVENANT_TOKENS: no tokens")
	}
	return t, nil
}

// BearerToken reads the token of an Authorization header value of the
// Bearer scheme: ok is false for any other scheme. The scheme's name is
// case-insensitive (RFC 9110 §11.1: "bearer" and "BEARER" are "Bearer"),
// and one or more spaces separate it from the token.
func BearerToken(header string) (token string, ok bool) {
	scheme, rest, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(rest, " "), true
}

// Authenticate implements Authenticator.
func (t *Tokens) Authenticate(r *httpmsg.Request, queryToken bool) (string, error) {
	if len(r.Header.Values("Authorization")) > 1 {
		// Which one would count is a guess (Cloudflare joins them into
		// one value, which then fails): refuse rather than pick.
		return "", fail(ErrUnauthorized, "more than one Authorization header")
	}
	// A request that sends an Authorization header is judged by it alone,
	// whatever its scheme or form ("Bearer" with no token, "Basic …"): the
	// query's token stands in only for a header the client could not send.
	header := r.Header.Values("Authorization")
	if len(header) == 1 && header[0] == "" {
		// Cloudflare drops an empty header before the Worker sees it:
		// absent on every host, so the query's token may stand in.
		header = nil
	}
	token, ok := "", false
	if len(header) > 0 {
		token, ok = BearerToken(header[0])
	} else if queryToken {
		q := r.URL.Query()["access_token"]
		if len(q) > 1 {
			// As for two Authorization headers: refuse rather than pick.
			return "", fail(ErrUnauthorized, "more than one access_token")
		}
		if len(q) == 1 {
			token, ok = q[0], true
		}
	}
	if !ok || token == "" {
		return "", fail(ErrUnauthorized, "a bearer token is required")
	}
	sum := digest.Sum256([]byte(token))
	principal, found := "", 0
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], e.hash[:]) == 1 {
			principal, found = e.principal, 1
		}
	}
	if found == 0 {
		return "", fail(ErrUnauthorized, "the bearer token is not valid")
	}
	return principal, nil
}
