package web_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/revenantrt/revenant/tools/web"
)

// A webhook receiver checks the signature over the exact bytes it read,
// before parsing them, and deduplicates by Idempotency-Key.
func ExampleVerify() {
	secret := []byte("the tool's configured secret")
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || !web.Verify(secret, body, r.Header.Get(web.SignatureHeader)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		key := r.Header.Get(web.IdempotencyKeyHeader)
		_ = key // look the key up: seen before, answer as before; else act and record it
		_, _ = io.WriteString(w, `{"ok":true}`)
	}
	_ = handler

	body := []byte(`{"title":"Disk almost full"}`)
	sig := web.Sign(secret, body)
	fmt.Println(web.Verify(secret, body, sig))
	fmt.Println(web.Verify(secret, []byte(`{"title":"Disk full"}`), sig))
	// Output:
	// true
	// false
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
