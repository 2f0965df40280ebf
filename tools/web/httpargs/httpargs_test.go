package httpargs_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/tools/web/httpargs"
)

// TestParse: the method is uppercased (GET if omitted), and the URL,
// headers and body are the model's.
func TestParse(t *testing.T) {
	a, err := httpargs.Parse(json.RawMessage(`{"method":"post","url":"https://example.com/things?x=1","headers":{"X-Test":"yes","Idempotency-Key":"k"},"body":"{\"a\":1}"}`))
	require.NoError(t, err)
	require.Equal(t, "POST", a.Method)
	require.Equal(t, "https://example.com/things?x=1", a.URL.String())
	require.Equal(t, map[string]string{"X-Test": "yes", "Idempotency-Key": "k"}, a.Headers)
	require.Equal(t, `{"a":1}`, a.Body)

	a, err = httpargs.Parse(json.RawMessage(`{"url":"http://example.com"}`))
	require.NoError(t, err)
	require.Equal(t, "GET", a.Method)
	require.Empty(t, a.Headers)
	require.Empty(t, a.Body)

	for _, m := range []string{"GET", "head", "Post", "PUT", "patch", "DELETE"} {
		_, err := httpargs.Parse(json.RawMessage(`{"url":"https://example.com","method":"` + m + `"}`))
		require.NoError(t, err, m)
	}
	_, err = httpargs.Parse(json.RawMessage(`{"url":"https://example.com","headers":{"X-A":"tab\tis fine"}}`))
	require.NoError(t, err)
	// The longest host DNS resolves, with or without its trailing dot.
	long := strings.Repeat("a.", 126) + "b"
	for _, h := range []string{long, long + "."} {
		_, err = httpargs.Parse(json.RawMessage(`{"url":"https://` + h + `:8443/"}`))
		require.NoError(t, err, "a %d-byte host", len(h))
	}
}

// TestParseRefuses: every argument the client could not send, or should
// not, is refused with an error that says what to change; Resources
// refuses the same.
func TestParseRefuses(t *testing.T) {
	for args, want := range map[string]string{
		`{"url":"https://example.com","method":"TRACE"}`:                       `invalid arguments: method "TRACE" is not one of GET, HEAD, POST, PUT, PATCH, DELETE`,
		`{"url":"https://example.com","method":"CONNECT"}`:                     `invalid arguments: method "CONNECT" is not one of`,
		`{"url":"/relative"}`:                                                  `invalid arguments: url "/relative" is not an absolute http or https URL`,
		`{"url":"mailto:a@example.com"}`:                                       `invalid arguments: url "mailto:a@example.com" is not an absolute http or https URL`,
		`{}`:                                                                   `invalid arguments: url "" is not an absolute http or https URL`,
		`{"url":"https://example.com","verb":"GET"}`:                           `invalid arguments: unknown field "verb"`,
		`{"url":"https://example.com","headers":{"host":"x"}}`:                 `invalid arguments: header host cannot be set`,
		`{"url":"https://example.com","headers":{"content-length":"1"}}`:       `invalid arguments: header content-length cannot be set`,
		`{"url":"https://example.com","headers":{"Transfer-Encoding":"x"}}`:    `invalid arguments: header Transfer-Encoding cannot be set`,
		`{"url":"https://example.com","method":"HEAD","body":"x"}`:             `invalid arguments: a HEAD request has no body`,
		`{"url":"https://example.com","headers":{"X-A":"a\r\nX-Injected: 1"}}`: `invalid arguments: the value of header X-A holds a control character`,
		`{"url":"https://example.com","headers":{"X-A":"a\u0000b"}}`:           `invalid arguments: the value of header X-A holds a control character`,
		`{"url":"https://example.com","headers":{"X-A":"a\u007fb"}}`:           `invalid arguments: the value of header X-A holds a control character`,
		`{"url":"https://example.com","headers":{"X-A\r\nX-B":"v"}}`:           `invalid arguments: header name "X-A\r\nX-B" is not a valid HTTP field name`,
		`{"url":"https://example.com","headers":{"X A":"v"}}`:                  `invalid arguments: header name "X A" is not a valid HTTP field name`,
		`{"url":"https://example.com","headers":{"X:A":"v"}}`:                  `invalid arguments: header name "X:A" is not a valid HTTP field name`,
		`{"url":"https://example.com","headers":{"X/A":"v"}}`:                  `invalid arguments: header name "X/A" is not a valid HTTP field name`,
		`{"url":"https://example.com","headers":{"X=A":"v"}}`:                  `invalid arguments: header name "X=A" is not a valid HTTP field name`,
		`{"url":"https://example.com","headers":{"X(A)":"v"}}`:                 `invalid arguments: header name "X(A)" is not a valid HTTP field name`,
		`{"url":"https://example.com","headers":{"X\u007fA":"v"}}`:             `invalid arguments: header name "X\x7fA" is not a valid HTTP field name`,
		`{"url":"//example.com/x"}`:                                            `invalid arguments: url "//example.com/x" is not an absolute http or https URL`,
		`{"url":"https://example.com","method":"head","body":"x"}`:             `invalid arguments: a HEAD request has no body`,
		`{"url":"https://example.com","headers":{"":"v"}}`:                     `invalid arguments: header name "" is not a valid HTTP field name`,
		`{"url":"https://example.com","headers":{"Ünicode":"v"}}`:              `invalid arguments: header name "Ünicode" is not a valid HTTP field name`,
		`{"url":"https://example.com\r\nX-B: 1"}`:                              `invalid arguments: url`,
		`{"url":"https://example.com","headers":{"X-A":1}}`:                    `invalid arguments: cannot unmarshal number`,
		`[1]`:      `invalid arguments: cannot unmarshal array into Go value of type struct`,
		`not json`: `invalid arguments: invalid character`,
		`{"url":"https://` + strings.Repeat("a", 254) + `/"}`: `invalid arguments: the url's host is 254 bytes long; a host name has at most 253`,
	} {
		_, err := httpargs.Parse(json.RawMessage(args))
		require.ErrorContains(t, err, want, args)
		res, err := httpargs.Resources(json.RawMessage(args))
		require.ErrorContains(t, err, want, args)
		require.Nil(t, res, args)
	}
}

// TestResources: one resource, "http:" and the host without port, case or
// trailing dot, so a permission granted for a host covers every spelling
// of it.
func TestResources(t *testing.T) {
	for url, want := range map[string]string{
		"https://API.Example.com:8443/x":   "http:api.example.com",
		"http://api.example.com./y?z=1":    "http:api.example.com",
		"https://user:pw@example.com/":     "http:example.com",
		"http://[2001:DB8::1]:8080/":       "http:2001:db8::1",
		"https://93.184.216.34/index.html": "http:93.184.216.34",
		// One address, one resource, however it is written: a rule naming
		// 127.0.0.1 is not passed by its IPv4-mapped IPv6 spellings.
		"http://[::ffff:127.0.0.1]:18791/":      "http:127.0.0.1",
		"http://[0:0:0:0:0:ffff:7f00:1]:18791/": "http:127.0.0.1",
		"http://[2001:0db8:0000:0000::0001]/":   "http:2001:db8::1",
		"http://[0:0:0:0:0:0:0:1]/":             "http:::1",
	} {
		res, err := httpargs.Resources(json.RawMessage(`{"url":"` + url + `"}`))
		require.NoError(t, err, url)
		require.Equal(t, []string{want}, res, url)
	}
}

func TestNormalizeHost(t *testing.T) {
	require.Equal(t, "api.example.com", httpargs.NormalizeHost("API.Example.COM."))
	require.Equal(t, "api.example.com", httpargs.NormalizeHost("api.example.com"))
	require.Equal(t, "", httpargs.NormalizeHost("."))
}
