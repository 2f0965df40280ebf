package treetest

import (
	"io"
	"strings"
)

// BodyThatRunsOnRead is a request body of text that calls during once,
// when the handler first reads it: after the route found its session,
// before anything the request writes. Tests use it to put a delete or a
// fault exactly between a route's lookup and its work.
func BodyThatRunsOnRead(text string, during func()) io.Reader {
	return &onRead{f: during, body: strings.NewReader(text)}
}

type onRead struct {
	f    func()
	body *strings.Reader
}

func (b *onRead) Read(p []byte) (int, error) {
	if b.f != nil {
		b.f()
		b.f = nil
	}
	return b.body.Read(p)
}
