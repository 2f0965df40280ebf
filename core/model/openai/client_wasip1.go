//go:build wasip1

package openai

// defaultClient is none in the wasip1 guest: its egress goes through the
// ABI, and a reference to http.DefaultClient would link net/http's
// transport and crypto/tls into it.
func defaultClient() Doer { return nil }
