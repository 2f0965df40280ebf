package web

import "time"

// SplitHostPort is the dialer's "host:port" split.
func SplitHostPort(address string) (string, uint16, error) { return splitHostPort(address) }

// WithClock returns a copy of w whose requests are stamped with now's
// times.
func (w *Webhook) WithClock(now func() time.Time) *Webhook {
	c := *w
	c.now = now
	return &c
}
