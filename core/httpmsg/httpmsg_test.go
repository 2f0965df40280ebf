package httpmsg_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// The tests compare with net/http, which only a test may import here.

func TestCanonicalKeyMatchesNetHTTP(t *testing.T) {
	for _, k := range []string{"", "a", "content-type", "CONTENT-TYPE", "x-revenant-tree", "Last-Event-ID",
		"etag", "www-authenticate", "-x", "x-", "a--b", "with space", "colon:", "ünicode", "X_Under", "a1-b2"} {
		assert.Equal(t, http.CanonicalHeaderKey(k), httpmsg.CanonicalKey(k), "key %q", k)
	}
}

func FuzzCanonicalKey(f *testing.F) {
	f.Add("content-type")
	f.Add("a b")
	f.Fuzz(func(t *testing.T, k string) {
		if got, want := httpmsg.CanonicalKey(k), http.CanonicalHeaderKey(k); got != want {
			t.Fatalf("CanonicalKey(%q) = %q, net/http says %q", k, got, want)
		}
	})
}

func TestStatusTextMatchesNetHTTP(t *testing.T) {
	for code := 100; code < 600; code++ {
		assert.Equal(t, http.StatusText(code), httpmsg.StatusText(code), "code %d", code)
	}
}

func TestHeaderIsHTTPHeader(t *testing.T) {
	h := httpmsg.Header{}
	h.Set("content-type", "text/plain")
	h.Add("x-a", "1")
	h.Add("X-A", "2")
	hh := http.Header(h)
	assert.Equal(t, "text/plain", hh.Get("Content-Type"))
	assert.Equal(t, []string{"1", "2"}, hh.Values("x-a"))
	c := h.Clone()
	c.Del("X-A")
	assert.Equal(t, []string{"1", "2"}, h.Values("x-a"), "a clone is deep")
	assert.Equal(t, []string{"Content-Type", "X-A"}, h.Keys())
}

func TestSortStrings(t *testing.T) {
	for _, s := range [][]string{
		nil, {"a"}, {"b", "a"}, {"a", "a", ""},
		strings.Fields("X-B Content-Type x-a X-A b a c b a Accept 0 Z z y Y"),
	} {
		want := slices.Clone(s)
		slices.Sort(want)
		httpmsg.SortStrings(s)
		assert.Equal(t, want, s)
	}
	s := make([]string, 1000)
	for i := range s {
		s[i] = strconv.Itoa(i * 7919 % 1000)
	}
	want := slices.Clone(s)
	slices.Sort(want)
	httpmsg.SortStrings(s)
	assert.Equal(t, want, s)
}

func TestNewRequest(t *testing.T) {
	r, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodPost, "http://example.test/a%2Fb?x=1", strings.NewReader("hi"))
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.ContentLength)
	assert.Equal(t, "example.test", r.Host)
	assert.Equal(t, "/a/b", r.URL.Path)
	assert.Equal(t, "1", r.URL.Query().Get("x"))
	_, err = httpmsg.NewRequest(context.Background(), "BAD METHOD", "http://x/", nil)
	assert.Error(t, err)
	_, err = httpmsg.NewRequest(context.Background(), "GET", "http://x/%zz", nil)
	assert.Error(t, err)
	r.SetPathValue("id", "s1")
	assert.Equal(t, "s1", r.PathValue("id"))
	ctx, cancel := context.WithCancel(context.Background())
	r2 := r.WithContext(ctx)
	cancel()
	assert.Error(t, r2.Context().Err())
	assert.NoError(t, r.Context().Err())
}

// Every delimiter RFC 9110 keeps out of a token leaves a key as it is, as
// net/http does: "a/b" must not become "A/b".
func TestCanonicalKeyLeavesDelimitedKeysAlone(t *testing.T) {
	for _, c := range `"(),/:;<=>?@[\]{}` {
		k := "a" + string(c) + "b"
		assert.Equal(t, http.CanonicalHeaderKey(k), httpmsg.CanonicalKey(k), "key %q", k)
	}
}

// Del takes any spelling of the key, as Get and Set do.
func TestHeaderDelCanonicalizes(t *testing.T) {
	h := httpmsg.Header{}
	h.Set("Content-Type", "text/plain")
	h.Del("content-type")
	assert.Empty(t, h, "the key is gone")
}

// A clone of nil is nil (as http.Header.Clone), and a clone's values are
// its own: writing through Values of one leaves the other as it was.
func TestHeaderCloneOwnsItsValues(t *testing.T) {
	assert.Nil(t, httpmsg.Header(nil).Clone())
	h := httpmsg.Header{}
	h.Add("X-A", "1")
	c := h.Clone()
	c.Values("x-a")[0] = "changed"
	assert.Equal(t, []string{"1"}, h.Values("x-a"))
}

// The status and method constants are net/http's numbers and names: a
// handler answering StatusTooManyRequests must send 429.
func TestConstantsMatchNetHTTP(t *testing.T) {
	for got, want := range map[int]int{
		httpmsg.StatusOK: http.StatusOK, httpmsg.StatusCreated: http.StatusCreated, httpmsg.StatusAccepted: http.StatusAccepted,
		httpmsg.StatusNoContent: http.StatusNoContent, httpmsg.StatusMovedPermanently: http.StatusMovedPermanently,
		httpmsg.StatusFound: http.StatusFound, httpmsg.StatusSeeOther: http.StatusSeeOther, httpmsg.StatusNotModified: http.StatusNotModified,
		httpmsg.StatusTemporaryRedirect: http.StatusTemporaryRedirect, httpmsg.StatusPermanentRedirect: http.StatusPermanentRedirect,
		httpmsg.StatusBadRequest: http.StatusBadRequest, httpmsg.StatusUnauthorized: http.StatusUnauthorized,
		httpmsg.StatusForbidden: http.StatusForbidden, httpmsg.StatusNotFound: http.StatusNotFound,
		httpmsg.StatusMethodNotAllowed: http.StatusMethodNotAllowed, httpmsg.StatusRequestTimeout: http.StatusRequestTimeout,
		httpmsg.StatusConflict: http.StatusConflict, httpmsg.StatusGone: http.StatusGone,
		httpmsg.StatusRequestEntityTooLarge: http.StatusRequestEntityTooLarge, httpmsg.StatusUnsupportedMediaType: http.StatusUnsupportedMediaType,
		httpmsg.StatusUnprocessableEntity: http.StatusUnprocessableEntity, httpmsg.StatusTooManyRequests: http.StatusTooManyRequests,
		httpmsg.StatusInternalServerError: http.StatusInternalServerError, httpmsg.StatusNotImplemented: http.StatusNotImplemented,
		httpmsg.StatusBadGateway: http.StatusBadGateway, httpmsg.StatusServiceUnavailable: http.StatusServiceUnavailable,
		httpmsg.StatusGatewayTimeout: http.StatusGatewayTimeout,
	} {
		assert.Equal(t, want, got, http.StatusText(want))
	}
	assert.Equal(t, []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions},
		[]string{httpmsg.MethodGet, httpmsg.MethodHead, httpmsg.MethodPost, httpmsg.MethodPut, httpmsg.MethodPatch, httpmsg.MethodDelete, httpmsg.MethodOptions})
}

// NewRequest refuses a nil context, and a request without a method or a
// body is a GET whose Body is an empty reader, never nil.
func TestNewRequestDefaults(t *testing.T) {
	//nolint:staticcheck // a nil context is what is refused
	_, err := httpmsg.NewRequest(nil, "GET", "http://x/", nil)
	require.ErrorContains(t, err, "nil context")

	r, err := httpmsg.NewRequest(context.Background(), "", "http://x/", nil)
	require.NoError(t, err)
	assert.Equal(t, httpmsg.MethodGet, r.Method)
	require.NotNil(t, r.Body)
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	assert.Empty(t, b)
	assert.Zero(t, r.ContentLength)
}

// closeCounter is a body of unknown length that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// A body of unknown length has ContentLength -1 and no GetBody; a body
// that is a ReadCloser is closed by closing Body (a Doer's close reaches
// it).
func TestNewRequestKeepsTheBodysCloser(t *testing.T) {
	body := &closeCounter{Reader: strings.NewReader("x")}
	r, err := httpmsg.NewRequest(context.Background(), "POST", "http://x/", body)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), r.ContentLength)
	assert.Nil(t, r.GetBody, "a stream cannot be read again")
	require.NoError(t, r.Body.Close())
	assert.Equal(t, 1, body.closed, "closing Body closed the caller's body")
}

// GetBody returns the whole body each time, even after Body was read, for
// every body type NewRequest sizes.
func TestNewRequestGetBodyRereadsTheWholeBody(t *testing.T) {
	for name, body := range map[string]io.Reader{
		"bytes.Reader":   bytes.NewReader([]byte("payload")),
		"bytes.Buffer":   bytes.NewBufferString("payload"),
		"strings.Reader": strings.NewReader("payload"),
	} {
		r, err := httpmsg.NewRequest(context.Background(), "POST", "http://x/", body)
		require.NoError(t, err, name)
		assert.Equal(t, int64(7), r.ContentLength, name)
		first, err := io.ReadAll(r.Body)
		require.NoError(t, err, name)
		require.Equal(t, "payload", string(first), name)
		for range 2 {
			rc, err := r.GetBody()
			require.NoError(t, err, name)
			again, err := io.ReadAll(rc)
			require.NoError(t, err, name)
			assert.Equal(t, "payload", string(again), name)
		}
	}
}

// A router sets one path value per {name} of its pattern: each keeps its
// own.
func TestPathValuesAreKeptSideBySide(t *testing.T) {
	r, err := httpmsg.NewRequest(context.Background(), "GET", "http://x/", nil)
	require.NoError(t, err)
	r.SetPathValue("id", "s1")
	r.SetPathValue("call", "c1")
	assert.Equal(t, "s1", r.PathValue("id"))
	assert.Equal(t, "c1", r.PathValue("call"))
	assert.Empty(t, r.PathValue("other"))
}

// AddReceived reads a field's value as net/http reads a request's: the
// spaces and tabs around it are not part of it; those inside stay.
func TestAddReceivedReadsAsNetHTTP(t *testing.T) {
	for _, v := range []string{"Bearer tok ", "Bearer tok\t", " \tBearer  tok \t ", "1 ", "", "  ", "a \t b"} {
		raw := "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: " + v + "\r\n\r\n"
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		require.NoError(t, err, "%q", v)
		h := httpmsg.Header{}
		h.AddReceived("authorization", v)
		assert.Equal(t, r.Header.Values("Authorization"), h.Values("Authorization"), "%q", v)
	}
}
