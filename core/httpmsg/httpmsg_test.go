package httpmsg_test

import (
	"context"
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
