package runtime

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The guest's output buffer keeps the last tailMax bytes: a panic is the
// last thing a dying guest writes.
func TestTailBufferKeepsTheLastBytes(t *testing.T) {
	var tb tailBuffer
	_, _ = tb.Write(bytes.Repeat([]byte("early output\n"), tailMax/8))
	_, _ = tb.Write([]byte("panic: boom\n"))
	s := tb.String()
	require.Len(t, s, tailMax)
	require.True(t, strings.HasSuffix(s, "early output\npanic: boom\n"))
}

// A failed call's error ends with the guest's last paragraph of output,
// bounded; no output adds nothing.
func TestTailIsTheLastParagraph(t *testing.T) {
	var tb tailBuffer
	require.Empty(t, tb.tail())

	_, _ = tb.Write([]byte("  \n"))
	require.Empty(t, tb.tail(), "blank output says nothing")

	tb = tailBuffer{}
	_, _ = tb.Write([]byte("starting\nserving\n\ngoroutine 1 [running]:\nmain.main()\n"))
	require.Equal(t, " (guest output: \n\ngoroutine 1 [running]:\nmain.main())", tb.tail())

	tb = tailBuffer{}
	_, _ = tb.Write(bytes.Repeat([]byte("x"), 3000))
	require.Len(t, tb.tail(), len(" (guest output: )")+2048)
}
