// Package webnet is the net/http side of tools/web, for hosts with
// sockets: the client that sends the web tools' requests from this
// process, every connection dialed through the egress policy's
// DialContext (each address a name resolves to checked, only a checked
// address dialed, the socket's address checked again before connect), with
// no proxy and no redirects followed (the http_request tool follows them
// itself, checking each).
//
// tools/web imports no net/http, so that a binary that sends nothing
// itself (the wasm guest, the Durable Object, whose platform's fetch sends
// through Egress.WithTransport) links no HTTP client, TLS or x509. A host
// that does dial gives its policy to Dialing before building the tools:
//
//	policy := webnet.Dialing(conf.EgressPolicy())
//	tools := []tool.Tool{web.NewHTTPRequest(policy)}
package webnet
