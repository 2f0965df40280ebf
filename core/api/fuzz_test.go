package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/internal/treetest"
)

// The decoders never panic and every rejection is a client error; a
// well-formed JSON object in UTF-8 is never called malformed (its numbers may not
// fit a float64: 1e999). CI runs each target for a fixed short time (make
// fuzz).
func fuzzDecoder(f *testing.F, seeds []string, decode func([]byte) error) {
	for _, s := range append(seeds, `{"text":"a","id":1e999}`, `{"config":{"tools":[-1e400]}}`, `{"answers":[1E999],"response_id":1e999}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := decode(body)
		if err == nil {
			return
		}
		status := api.StatusOf(err)
		if status < 400 || status >= 500 {
			t.Fatalf("decoder error %v maps to %d, want 4xx", err, status)
		}
		var de *api.DecodeError
		if trimmed := strings.TrimSpace(string(body)); utf8.Valid(body) && json.Valid(body) && strings.HasPrefix(trimmed, "{") &&
			errors.As(err, &de) && de.Problem == api.ProblemSyntax {
			t.Fatalf("a well-formed object %q is refused as malformed: %v", body, err)
		}
	})
}

func FuzzDecodePrompt(f *testing.F) {
	fuzzDecoder(f, []string{`{"text":"hi"}`, `{"text":"a","id":"x","mode":"replace"}`, `{"text":5}`, `[]`, ``, `{"text":"a"}{}`, `{"text":"a","TEXT":"b"}`, `{"text":"a","text":"b"}`, `null`, `{"text":"\ud800","id":"\ud83d\ude00"}`},
		func(b []byte) error { _, err := api.DecodePrompt(b); return err })
}

func FuzzDecodeCreate(f *testing.F) {
	fuzzDecoder(f, []string{``, `{}`, `{"config":{"system_prompt":"be brief","tools":["echo"]}}`, `{"config":7}`, `{"config":{"x":1}}`, `null`, `{"config":{"model":"a","MODEL":"b"}}`, `{"config":{"tools":[{"a":1,"a":1}]}}`},
		func(b []byte) error { _, err := api.DecodeCreate(b); return err })
}

func FuzzDecodeReply(f *testing.F) {
	fuzzDecoder(f, []string{`{"reply":"once","response_id":"r"}`, `{"answers":[["a"]],"response_id":"r"}`, `{"cancel":true,"response_id":"r"}`},
		func(b []byte) error {
			if _, err := api.DecodeReply(b, "permission"); err != nil {
				return err
			}
			_, err := api.DecodeReply(b, "question")
			return err
		})
}

// The Host and Origin checks never panic, answer only 200 (or 204, a
// preflight) or a typed 403, and serve a request only when its Host is
// empty or names loopback (by an independent reading: net/url's, then
// netip's) and its Origin is absent, empty or allowed. CI runs it with the
// decoders (make fuzz).
func FuzzRequestSource(f *testing.F) {
	const allowed = "https://console.example"
	h, err := api.New(api.Deps{Trees: newMemTrees(f, treetest.NewDriver(1)), Auth: api.Anonymous{}, Clock: fakehost.NewClock(0), IDs: &fakehost.IDs{}},
		api.NewConfig().WithLoopbackOnly(true).WithAllowedOrigins(allowed))
	if err != nil {
		f.Fatal(err)
	}
	for _, host := range []string{"", "127.0.0.1:8787", "[::1]:8787", "::1", "localhost.", "LOCALHOST:1", "127.9.9.9", "rebind.attacker.example:8787",
		"[::1", "[::ffff:127.0.0.1]", "[::1%25lo]", "localhost:99999", "0.0.0.0"} {
		f.Add(host, false, "", "GET")
		f.Add(host, true, allowed, "OPTIONS")
		f.Add(host, true, "null", "POST")
		f.Add(host, true, "", "POST")
	}
	f.Fuzz(func(t *testing.T, host string, withOrigin bool, origin, method string) {
		r := httptest.NewRequest("GET", "/healthz", nil)
		if validMethod(method) {
			r.Method = method
		}
		r.Host = host
		if withOrigin {
			r.Header["Origin"] = []string{origin}
		}
		r.Header.Set("Access-Control-Request-Method", "GET")
		w := httptest.NewRecorder()
		nethttp.Handler(h).ServeHTTP(w, r)
		if w.Code == http.StatusForbidden {
			var e api.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || (e.Error.Type != api.ErrForbiddenHost && e.Error.Type != api.ErrForbiddenOrigin) {
				t.Fatalf("403 without a typed body: %s", w.Body)
			}
			return
		}
		if !oracleLoopback(host) {
			t.Fatalf("Host %q served (%d), but it does not name loopback", host, w.Code)
		}
		// An empty Origin counts as none (Cloudflare drops it).
		if withOrigin && origin != "" && !strings.EqualFold(origin, allowed) {
			t.Fatalf("Origin %q served (%d), but it is not allowed", origin, w.Code)
		}
	})
}

// oracleLoopback reads a Host header with net/url and netip.
func oracleLoopback(host string) bool {
	if host == "" {
		return true
	}
	if strings.Count(host, ":") > 1 && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	u, err := url.Parse("http://" + host + "/")
	if err != nil || u.Host != host {
		return false
	}
	name := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if name == "localhost" {
		return true
	}
	addr, err := netip.ParseAddr(name)
	return err == nil && addr.Zone() == "" && addr.Unmap().IsLoopback()
}

// validMethod: an HTTP token, as a server would have read it.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}
