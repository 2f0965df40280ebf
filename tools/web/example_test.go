package web_test

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/revenantrt/revenant/tools/web"
)

// A webhook receiver checks the signature over the exact bytes it read,
// before parsing them, refuses a stale timestamp, and deduplicates by
// webhook-id (the call's idempotency key).
func ExampleVerify() {
	key, _ := web.SigningKey("the tool's configured secret")
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = web.Verify(key, r.Header, body, time.Now())
		}
		if err != nil {
			http.Error(w, "unverified", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get(web.IDHeader)
		_ = id // look the id up: seen before, answer as before; else act and record it
		_, _ = io.WriteString(w, `{"ok":true}`)
	}
	_ = handler

	sent, body := time.Unix(1_700_000_000, 0), []byte(`{"title":"Disk almost full"}`)
	h := http.Header{}
	h.Set(web.IDHeader, "root.1/s1/step-3/0")
	h.Set(web.TimestampHeader, "1700000000")
	h.Set(web.SignatureHeader, web.Sign(key, "root.1/s1/step-3/0", sent, body))
	fmt.Println(web.Verify(key, h, body, sent.Add(time.Minute)))
	fmt.Println(web.Verify(key, h, []byte(`{"title":"Disk full"}`), sent))
	fmt.Println(web.Verify(key, h, body, sent.Add(time.Hour)))
	// Output:
	// <nil>
	// webhook not verified: no v1 signature in webhook-signature matches
	// webhook not verified: webhook-timestamp is 1h0m0s from now, more than 5m0s
}

// The http_request tool and webhook tools share one policy; private
// addresses are refused unless a range is allowed.
func ExampleNewEgress() {
	policy := web.NewEgress().
		WithHosts("*.example.com").
		WithPorts(443).
		WithTimeout(0) // the default, 30 s
	fmt.Println(policy)
	// Output:
	// schemes https, http; ports 443; hosts *.example.com; private ranges allowed: none; max response 1048576 bytes; timeout 30s
}
