package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// An egress end's code comes from what the error is, never its text.
func TestEndOf(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		kind abi.EgressKind
		err  error
		want abi.EndCode
	}{
		{abi.EgressModel, nil, abi.EndOK},
		{abi.EgressModel, &transportError{dialErr}, abi.EndNetwork},
		{abi.EgressModel, io.ErrUnexpectedEOF, abi.EndNetwork},
		{abi.EgressModel, fmt.Errorf("egress: x is not the configured model endpoint: %w", web.ErrDenied), abi.EndDenied},
		{abi.EgressModel, &transportError{context.DeadlineExceeded}, abi.EndTimeout},
		{abi.EgressModel, &transportError{context.Canceled}, abi.EndCancelled},
		{abi.EgressTool, fmt.Errorf("http_request: %w: port 22 is not allowed", web.ErrDenied), abi.EndDenied},
		{abi.EgressTool, fmt.Errorf("read: %w", web.ErrTooLarge), abi.EndTooLarge},
		{abi.EgressTool, dialErr, abi.EndNetwork},
		{abi.EgressTool, errors.New("webhook answered 500: network timeout fenced"), abi.EndError},
		{abi.EgressKind(9), errors.New("unknown egress kind 9"), abi.EndError},
	} {
		end := endOf(tc.kind, tc.err)
		require.Equal(t, tc.want, end.Code, "%v", tc.err)
		if tc.err != nil {
			require.Equal(t, tc.err.Error(), end.Message)
		}
	}
}

// The provider key never reaches the guest, and the redacted error keeps
// its code.
func TestRedactKeepsTheCode(t *testing.T) {
	tr := &Tree{cfg: Config{Model: ModelEgress{APIKey: "sk-secret"}}}
	err := tr.redact(&transportError{fmt.Errorf("dial https://sk-secret@x: %w", context.DeadlineExceeded)})
	end := endOf(abi.EgressModel, err)
	require.Equal(t, abi.EndTimeout, end.Code)
	require.NotContains(t, end.Message, "sk-secret")
	require.Contains(t, end.Message, "[redacted]")
}

// The key goes to the configured endpoint only: a model egress to any
// other URL, even another path under the provider's base URL, is refused
// (denied) before a request is made.
func TestModelEgressOnlyToTheEndpoint(t *testing.T) {
	tr := &Tree{cfg: Config{Boot: runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: "http://127.0.0.1:1/v1/"}},
		Model: ModelEgress{APIKey: "sk-secret"}}}
	for _, url := range []string{"http://127.0.0.1:1/v1/models", "http://127.0.0.1:1/v1/chat/completions/x", "http://127.0.0.1:1/v2/chat/completions", "http://127.0.0.1:2/v1/chat/completions"} {
		_, err := tr.modelRequest(context.Background(), abi.EgressRequest{Kind: abi.EgressModel, Method: "POST", URL: url})
		require.ErrorIs(t, err, web.ErrDenied, url)
	}
	tr.cfg.Boot.Model.Kind = abi.ModelOffline
	_, err := tr.modelRequest(context.Background(), abi.EgressRequest{Kind: abi.EgressModel, Method: "POST", URL: "http://127.0.0.1:1/v1/chat/completions"})
	require.ErrorIs(t, err, web.ErrDenied, "no provider is configured")
}
