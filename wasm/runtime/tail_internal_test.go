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
func TestTailIsTheCrashReportOrTheLastParagraph(t *testing.T) {
	var tb tailBuffer
	require.Empty(t, tb.tail())

	_, _ = tb.Write([]byte("  \n"))
	require.Empty(t, tb.tail(), "blank output says nothing")

	tb = tailBuffer{}
	_, _ = tb.Write([]byte("starting\nserving\n\ngoroutine 1 [running]:\nmain.main()\n"))
	require.Equal(t, " (guest output: \n\ngoroutine 1 [running]:\nmain.main())", tb.tail())

	// A Go crash report keeps its message, not only the trace after its
	// blank line; a recovered and re-raised panic keeps its whole chain,
	// and the last report wins.
	tb = tailBuffer{}
	_, _ = tb.Write([]byte("serving\n\npanic: first\n\ngoroutine 1 [running]:\n\npanic: runtime error: index out of range [5] with length 3 [recovered]\n\tpanic: again\n\ngoroutine 7 [running]:\nmain.main()\n"))
	require.Equal(t, " (guest output: panic: runtime error: index out of range [5] with length 3 [recovered]\n\tpanic: again\n\ngoroutine 7 [running]:\nmain.main())", tb.tail())
	// The last report wins whichever head it has: a "fatal error: " line
	// the guest logged before a panic does not start the tail.
	tb = tailBuffer{}
	_, _ = tb.Write([]byte("fatal error: logged, not fatal\nserving\n\npanic: boom\n\ngoroutine 1 [running]:\n"))
	require.Equal(t, " (guest output: panic: boom\n\ngoroutine 1 [running]:)", tb.tail())
	tb = tailBuffer{}
	_, _ = tb.Write([]byte("fatal error: all goroutines are asleep - deadlock!\n\ngoroutine 1 [chan receive]:\n"))
	require.Equal(t, " (guest output: fatal error: all goroutines are asleep - deadlock!\n\ngoroutine 1 [chan receive]:)", tb.tail())

	tb = tailBuffer{}
	_, _ = tb.Write(bytes.Repeat([]byte("x"), 3000))
	require.Len(t, tb.tail(), len(" (guest output: )")+2048)
}
