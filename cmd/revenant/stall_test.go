package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadlineRecorder is a ResponseWriter that records the write deadlines
// http.ResponseController sets on it.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// Every write and flush of a response gets its own deadline, and the
// writer stays a Flusher (event streams need it).
func TestStallLimitArmsEachWrite(t *testing.T) {
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	h := stallLimit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("a"))
		f, ok := w.(http.Flusher)
		require.True(t, ok, "still a Flusher")
		f.Flush()
		_, _ = w.Write([]byte("b"))
	}), time.Minute)
	before := time.Now()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, "ab", rec.Body.String())
	assert.True(t, rec.Flushed)
	require.Len(t, rec.deadlines, 3, "write, flush, write")
	for _, d := range rec.deadlines {
		assert.False(t, d.Before(before.Add(time.Minute)), "a deadline d from the write")
	}
}
