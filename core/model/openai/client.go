//go:build !wasip1

package openai

import "net/http"

// defaultClient is Config.Client's default: http.DefaultClient.
func defaultClient() Doer { return http.DefaultClient }
