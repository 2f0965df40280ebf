package abi_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/wasm/abi"
)

// The numbers a host and a guest agree on are the ones docs/abi.md gives.
// A round trip cannot see a constant changed on both sides at once, but a
// host or guest built from another version (or another language) would.
func TestConstantsAreTheDocumentedNumbers(t *testing.T) {
	require.Equal(t, "revenant", abi.ImportModule, "§4: the import module")
	require.Equal(t, []abi.Status{0, 1, 2, 3, 4},
		[]abi.Status{abi.StatusIdle, abi.StatusPending, abi.StatusError, abi.StatusVersion, abi.StatusNotBooted}, "§2: statuses")
	require.Equal(t, []int32{0, 1}, []int32{abi.NotIdle, abi.IsIdle}, "§3: revenant_idle")
	require.Equal(t, []abi.Phase{1, 2, 3}, []abi.Phase{abi.PhaseBoot, abi.PhaseSweep, abi.PhaseServe}, "§4: phase")
	require.Equal(t, []byte{0, 1}, []byte{abi.ResultOK, abi.ResultError}, "§4: SQL results")
	require.Equal(t, []int64{0, -1}, []int64{abi.SQLCodeNone, abi.SQLCodeClosed}, "§4: SQLError codes that are no SQLite code")
	require.Equal(t, []byte{0, 1, 2, 3, 4},
		[]byte{abi.ValueNull, abi.ValueInt, abi.ValueFloat, abi.ValueText, abi.ValueBlob}, "§5: value tags")
	require.Equal(t, []abi.PartKind{1, 2, 3, 4}, []abi.PartKind{abi.PartHead, abi.PartBody, abi.PartEnd, abi.PartDrain}, "§5: ResponsePart kinds")
	require.Equal(t, []abi.EgressKind{1, 2}, []abi.EgressKind{abi.EgressModel, abi.EgressTool}, "§4: egress kinds")
	require.Equal(t, []abi.EndCode{0, 1, 2, 3, 4, 5, 6, 7},
		[]abi.EndCode{abi.EndOK, abi.EndError, abi.EndFenced, abi.EndNetwork, abi.EndTimeout, abi.EndCancelled, abi.EndDenied, abi.EndTooLarge}, "§4: egress end codes")
	// §7: the minor version that added each appended field or import.
	require.Equal(t, []int{2, 3, 3, 4, 5, 6, 7, 8, 9, 10}, []int{
		abi.MinorEgressEpoch, abi.MinorEgressEndCode, abi.MinorPageSizes, abi.MinorPermissions,
		abi.MinorToolCallRules, abi.MinorWakeArmChecked, abi.MinorQueueCap, abi.MinorOperatorPolicy, abi.MinorDrain,
		abi.MinorMaxSubagents,
	})
}

// Every egress end code has the name the spec's table gives it (§4), which
// is also what logs and the guest's errors show.
func TestEndCodeNamesAreTheSpecTable(t *testing.T) {
	spec, err := os.ReadFile("../../docs/abi.md")
	require.NoError(t, err)
	for c := abi.EndError; c <= abi.EndTooLarge; c++ {
		require.Contains(t, string(spec), fmt.Sprintf("| %d | `%s` |", c, c), "a row for code %d", c)
	}
	require.Equal(t, "ok", abi.EndOK.String())
	require.Equal(t, "code(8)", abi.EndCode(8).String(), "past the table")
}

// Each message's bytes are the layout of docs/abi.md §5, written out by
// hand: a change to the encoder and the decoder alike (a field moved, a tag
// renumbered, a float byte order) passes a round trip but not this.
func TestEncodingsAreTheDocumentedLayout(t *testing.T) {
	float15 := []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f} // 1.5, little-endian IEEE 754
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	st, err := abi.Statement{Query: "q", Args: []any{nil, int64(-2), 1.5, "t", []byte{7}}}.Encode()
	require.NoError(t, err)
	require.Equal(t, cat([]byte{1, 'q', 5, 0, 1, 3, 2}, float15, []byte{3, 1, 't', 4, 1, 7}), st,
		"query, count, then tagged values: null, int -2 zig-zagged to 3, float, text, blob")

	rows, err := abi.Rows{Columns: []string{"a", "b"}, Values: [][]any{{int64(1), nil}}}.Encode()
	require.NoError(t, err)
	require.Equal(t, []byte{2, 1, 'a', 1, 'b', 1, 1, 2, 0}, rows, "column count, columns, row count, values row-major")

	require.Equal(t, []byte{1, 6, 'c', 'l', 'o', 's', 'e', 'd'}, abi.SQLError{Code: abi.SQLCodeClosed, Message: "closed"}.Encode(),
		"code -1 zig-zagged to 1, then the message")

	require.Equal(t, []byte{1, 0xc8, 0x01, 1, 1, 'A', 2, 1, 'x', 1, 'y'},
		abi.ResponsePart{Kind: abi.PartHead, Status: 200, Header: httpmsg.Header{"A": {"x", "y"}}}.Encode(), "head: status uvarint, header")
	require.Equal(t, []byte{2, 2, 'h', 'i'}, abi.ResponsePart{Kind: abi.PartBody, Body: []byte("hi")}.Encode())
	require.Equal(t, []byte{3}, abi.ResponsePart{Kind: abi.PartEnd}.Encode())
	require.Equal(t, []byte{3, 1}, abi.ResponsePart{Kind: abi.PartEnd, Aborted: true}.Encode(), "since 1.11: an aborted end appends true")
	require.Equal(t, []byte{4, 0xac, 0x02}, abi.ResponsePart{Kind: abi.PartDrain, Timer: 300}.Encode(), "drain: timer uvarint")

	require.Equal(t, []byte{2, 1, 'k', 4, 'P', 'O', 'S', 'T', 1, 'u', 0, 1, 'b', 7},
		abi.EgressRequest{Kind: abi.EgressTool, Target: "k", Method: "POST", URL: "u", Body: []byte("b"), Epoch: 7, HasEpoch: true}.Encode(),
		"kind, target, method, url, header, body, epoch")
	require.Equal(t, []byte{0xc8, 0x01, 0}, abi.EgressResponse{Status: 200}.Encode())
	require.Equal(t, []byte{2, 1, 'f'}, abi.EgressEnd{Code: abi.EndFenced, Message: "f"}.EncodeFor(abi.MinorEgressEndCode))

	require.Equal(t, []byte{1, 'e', 1, 's', 6, 1, 'x', 0xd0, 0x0f, 2, '{', '}'},
		abi.Emitted{ID: "e", SessionID: "s", Seq: 3, Type: "x", At: 1000, Data: []byte("{}")}.Encode(),
		"id, session_id, seq varint, type, at varint, data")
	require.Equal(t, []byte{1, 'c', 1, 'n', 0, 1, 'k', 1, 's', 1, 1, 'a', 1, 'r', 5, 'a', 'l', 'l', 'o', 'w', 1, 0},
		abi.ToolCall{ID: "c", Name: "n", IdempotencyKey: "k", SessionID: "s",
			SessionRules: []permission.Rule{{Action: "a", Resource: "r", Decision: permission.Allow, Exact: true}}}.Encode(),
		"id, name, arguments, idempotency_key, session_id, then the two rule lists")
}

// Decoded blobs are copies (Decoder's contract): the host reuses the
// buffer an export's input came in, so a decoded body must not change with it.
func TestDecodedBlobsDoNotAliasTheInput(t *testing.T) {
	b := abi.Request{Method: "POST", Path: "/", Body: []byte("body")}.Encode()
	got, err := abi.DecodeRequest(b)
	require.NoError(t, err)
	for i := range b {
		b[i] = 'X'
	}
	require.Equal(t, []byte("body"), got.Body)
}

// Each value has one encoding (§5): a bool other than 0 or 1, an overlong
// varint, a float cut short are malformed, not read as something else.
func TestDecodeRejectsNonCanonicalFields(t *testing.T) {
	// A rule's exact bool is 2.
	var e abi.Encoder
	for _, s := range []string{"c", "n", "", "k", "s"} {
		e.String(s)
	}
	e.Uvarint(1)
	e.String("a")
	e.String("r")
	e.String("allow")
	e.Byte(2)
	e.Uvarint(0)
	_, err := abi.DecodeToolCall(e.Bytes())
	require.ErrorIs(t, err, abi.ErrMalformed, "bool 2")

	// Emitted's seq 1 (zig-zag 2) written overlong as 0x82 0x00.
	overlong := []byte{1, 'e', 1, 's', 0x82, 0x00, 1, 't', 0, 0}
	_, err = abi.DecodeEmitted(overlong)
	require.ErrorIs(t, err, abi.ErrMalformed, "overlong varint")
	_, err = abi.DecodeEmitted([]byte{1, 'e', 1, 's', 0x02, 1, 't', 0, 0})
	require.NoError(t, err, "the same message in minimal form")

	// A float argument with 7 of its 8 bytes.
	_, err = abi.DecodeStatement([]byte{1, 'q', 1, abi.ValueFloat, 0, 0, 0, 0, 0, 0, 0})
	require.ErrorIs(t, err, abi.ErrMalformed, "short float")
}

// A response head's status is a three-digit HTTP status: one past it, or a
// large number that would wrap to a valid one in a narrower type, is
// malformed.
func TestResponseHeadStatusOutOfRangeIsMalformed(t *testing.T) {
	for _, status := range []uint64{99, 1000, 1<<16 + 200, 1<<32 + 200} {
		var e abi.Encoder
		e.Byte(byte(abi.PartHead))
		e.Uvarint(status)
		e.Uvarint(0)
		_, err := abi.DecodeResponsePart(e.Bytes())
		require.ErrorIs(t, err, abi.ErrMalformed, "status %d", status)
	}
	for _, status := range []int{100, 999} {
		_, err := abi.DecodeResponsePart(abi.ResponsePart{Kind: abi.PartHead, Status: status}.Encode())
		require.NoError(t, err, "status %d", status)
	}
}

// Only the two documented egress kinds decode: a host must not apply some
// credentials to a request of a kind it does not know.
func TestEgressRequestOfUnknownKindIsMalformed(t *testing.T) {
	for _, kind := range []abi.EgressKind{0, 3} {
		_, err := abi.DecodeEgressRequest(abi.EgressRequest{Kind: kind, Method: "GET", URL: "u"}.Encode())
		require.ErrorIs(t, err, abi.ErrMalformed, "kind %d", kind)
	}
}

// Epochs start at 1 and NoEpoch is 0; a negative epoch (never a real one)
// goes out as 0, which a host refuses like no epoch, rather than as a huge
// number that makes the whole request malformed.
func TestNegativeEpochIsSentAsNoEpoch(t *testing.T) {
	r := abi.EgressRequest{Kind: abi.EgressModel, Method: "POST", URL: "u", Epoch: -1, HasEpoch: true}
	got, err := abi.DecodeEgressRequest(r.Encode())
	require.NoError(t, err)
	require.True(t, got.HasEpoch)
	require.Equal(t, abi.NoEpoch, got.Epoch)
}

// A live delta (seq 0) is not durable; a stored event is.
func TestEmittedDeltaIsNotDurable(t *testing.T) {
	require.False(t, abi.Emitted{Type: "text.delta"}.Durable())
	require.True(t, abi.Emitted{Seq: 1}.Durable())
}

// Rows hold one value per column: a short row is refused when encoding,
// rows without columns are refused when decoding, and the smallest
// possible rows (one null per cell: one byte each) still decode.
func TestRowsShapeIsChecked(t *testing.T) {
	_, err := abi.Rows{Columns: []string{"a", "b"}, Values: [][]any{{int64(1)}}}.Encode()
	require.Error(t, err, "a row with one value for two columns")
	_, err = abi.DecodeRows([]byte{0, 2, 0, 0})
	require.ErrorIs(t, err, abi.ErrMalformed, "two rows without columns")

	b, err := abi.Rows{Columns: []string{"a"}, Values: [][]any{{nil}, {nil}}}.Encode()
	require.NoError(t, err)
	got, err := abi.DecodeRows(b)
	require.NoError(t, err)
	require.Equal(t, [][]any{{nil}, {nil}}, got.Values)
}

// Names stops interning at its bound: a name first seen past it is a fresh
// string in every result, so a guest's Names cannot grow without limit.
func TestNamesStopsInterningAtItsBound(t *testing.T) {
	var names abi.Names
	for i := range 1024 {
		b, err := abi.Rows{Columns: []string{fmt.Sprintf("c%d", i)}}.Encode()
		require.NoError(t, err)
		_, err = abi.DecodeRowsNames(b, &names)
		require.NoError(t, err)
	}
	b, err := abi.Rows{Columns: []string{"late"}}.Encode()
	require.NoError(t, err)
	first, err := abi.DecodeRowsNames(b, &names)
	require.NoError(t, err)
	again, err := abi.DecodeRowsNames(b, &names)
	require.NoError(t, err)
	require.Equal(t, "late", again.Columns[0])
	require.NotSame(t, unsafe.StringData(first.Columns[0]), unsafe.StringData(again.Columns[0]), "past the bound: not interned")
}

// A count field of BootConfig (resume budget, model retries) is absent,
// None as a present 0, or positive: a present negative one is malformed.
func TestBootConfigNegativeCountIsMalformed(t *testing.T) {
	good := abi.BootConfig{Settings: settings.Settings{ResumeBudget: 3}}.EncodeFor(0)
	bad := abi.BootConfig{Settings: settings.Settings{ResumeBudget: 3}}.EncodeFor(0)
	// The budget is the first count: present (1), then varint 3 (zig-zag 6).
	i := bytes.Index(bad, []byte{1, 6})
	require.GreaterOrEqual(t, i, 0)
	bad[i+1] = 5 // zig-zag -3
	_, err := abi.DecodeBootConfig(good)
	require.NoError(t, err)
	_, err = abi.DecodeBootConfig(bad)
	require.ErrorIs(t, err, abi.ErrMalformed)
	require.ErrorContains(t, err, "negative")
}
