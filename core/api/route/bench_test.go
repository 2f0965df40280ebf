package route_test

import (
	"net/http"
	"net/url"
	"testing"
)

// BenchmarkMatch: one request's routing, the API's longest path (a
// question reply), with the router and with ServeMux over the same table.
func BenchmarkMatch(b *testing.B) {
	const path = "/v1/sessions/abc.1/questions/q1"
	b.Run("route", func(b *testing.B) {
		m := ourMux()
		for b.Loop() {
			if _, ok := m.Match("POST", path); !ok {
				b.Fatal("no match")
			}
		}
	})
	b.Run("ServeMux", func(b *testing.B) {
		sm := serveMux()
		r := &http.Request{Method: "POST", URL: &url.URL{Path: path}, Host: "x"}
		for b.Loop() {
			if _, p := sm.Handler(r); p == "" {
				b.Fatal("no match")
			}
		}
	})
}
