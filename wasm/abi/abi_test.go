package abi_test

import (
	"unsafe"

	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/wasm/abi"
)

func TestRoundTrips(t *testing.T) {
	h := httpmsg.Header{"B": {"2", "3"}, "A": {"1"}}
	req := abi.Request{Method: "POST", Path: "/v1/sessions/x/prompt", RawQuery: "a=1", Header: h, Body: []byte(`{"text":"hi"}`)}
	gotReq, err := abi.DecodeRequest(req.Encode())
	require.NoError(t, err)
	require.Equal(t, req, gotReq)

	for _, p := range []abi.ResponsePart{
		{Kind: abi.PartHead, Status: 202, Header: h},
		{Kind: abi.PartBody, Body: []byte("data")},
		{Kind: abi.PartEnd},
		{Kind: abi.PartEnd, Aborted: true},
		{Kind: abi.PartDrain, Timer: 300},
	} {
		got, err := abi.DecodeResponsePart(p.Encode())
		require.NoError(t, err)
		require.Equal(t, p, got)
	}

	er := abi.EgressRequest{Kind: abi.EgressTool, Target: "hook", Method: "POST", URL: "tool:hook", Header: httpmsg.Header{}, Body: []byte{0, 1}}
	gotER, err := abi.DecodeEgressRequest(er.Encode())
	require.NoError(t, err)
	require.Equal(t, er, gotER)

	resp := abi.EgressResponse{Status: 200, Header: h}
	gotResp, err := abi.DecodeEgressResponse(resp.Encode())
	require.NoError(t, err)
	require.Equal(t, resp, gotResp)

	call := abi.ToolCall{ID: "c", Name: "n", Arguments: []byte(`{}`), IdempotencyKey: "k", SessionID: "s"}
	gotCall, err := abi.DecodeToolCall(call.Encode())
	require.NoError(t, err)
	require.Equal(t, call, gotCall)

	ev := abi.Emitted{ID: "e", SessionID: "s", Seq: 3, Type: "session.created@1", At: 1_700_000_000_000, Data: []byte(`{}`)}
	gotEv, err := abi.DecodeEmitted(ev.Encode())
	require.NoError(t, err)
	require.Equal(t, ev, gotEv)
	require.True(t, gotEv.Durable())

	st := abi.Statement{Query: "SELECT ?", Args: []any{nil, int64(-5), 2.5, "text", []byte{9}, []byte{}}}
	b, err := st.Encode()
	require.NoError(t, err)
	gotSt, err := abi.DecodeStatement(b)
	require.NoError(t, err)
	require.Equal(t, st, gotSt)
	// int and bool travel as integers.
	b, err = abi.Statement{Query: "q", Args: []any{7, true}}.Encode()
	require.NoError(t, err)
	gotSt, err = abi.DecodeStatement(b)
	require.NoError(t, err)
	require.Equal(t, []any{int64(7), int64(1)}, gotSt.Args)
	_, err = abi.Statement{Query: "q", Args: []any{struct{}{}}}.Encode()
	require.Error(t, err)

	rows := abi.Rows{Columns: []string{"a", "b"}, Values: [][]any{{int64(1), "x"}, {nil, []byte("y")}}}
	b, err = rows.Encode()
	require.NoError(t, err)
	gotRows, err := abi.DecodeRows(b)
	require.NoError(t, err)
	require.Equal(t, rows, gotRows)

	se := abi.SQLError{Code: 10 | 12<<8, Message: "disk I/O error"}
	gotSE, err := abi.DecodeSQLError(se.Encode())
	require.NoError(t, err)
	require.Equal(t, se, gotSE)

	tools := []string{"kv_get"}
	cfg := abi.BootConfig{HostMajor: 1, HostMinor: 3, TreeID: "t",
		Model: abi.ModelConfig{Kind: abi.ModelOpenAI, WordDelay: time.Millisecond, BaseURL: "http://x/v1", Name: "m"},
		Tools: []abi.ToolDecl{{Kind: abi.ToolWebhook, Name: "hook", Description: "d", Schema: []byte(`{}`), Idempotent: true, Timeout: time.Second, OutputCap: 10, MaxBytes: 20}},
		Settings: settings.Settings{ResumeBudget: settings.None, MaxClaimAge: time.Hour, WakeInterval: time.Second, InterruptGrace: time.Second,
			StepCap: 3, StreamIdle: 1, StepWall: 2, ToolTimeout: 3, ToolOutputCap: 4, CheckpointEvery: 5, CheckpointBytes: 6,
			ModelRetries: 2, RetryInitial: 7, RetryMax: 8, ContextBytes: 9, MaxRetryAfter: time.Second,
			Heartbeat: time.Second, MaxBody: 100, SessionPageSize: 11, MessagePageSize: 12},
		SystemPrompt: "sys",
		API:          abi.APIConfig{Tokens: "alice:sha256:00", SystemPrompt: "p", ModelName: "m", Tools: &tools},
	}
	gotCfg, err := abi.DecodeBootConfig(cfg.Encode())
	require.NoError(t, err)
	require.Equal(t, cfg, gotCfg)
	gotCfg, err = abi.DecodeBootConfig(abi.BootConfig{}.Encode())
	require.NoError(t, err)
	require.Equal(t, abi.BootConfig{}, gotCfg)
}

// Every field of Settings crosses the boundary: a test that fails when a
// field is added to settings.Settings without a place on the wire.
func TestBootConfigCarriesEverySetting(t *testing.T) {
	var s settings.Settings
	for i, f := range s.Fields() {
		switch {
		case f.Int != nil:
			*f.Int = i + 1
		case f.Int64 != nil:
			*f.Int64 = int64(i + 1)
		case f.Duration != nil:
			*f.Duration = time.Duration(i + 1)
		}
	}
	got, err := abi.DecodeBootConfig(abi.BootConfig{Settings: s}.Encode())
	require.NoError(t, err)
	require.Equal(t, s, got.Settings)
}

// The page sizes (1.3) are BootConfig's last fields, sent only to a guest
// of 1.3 or later: for an older guest the message is the 1.2 layout, which
// decodes with default page sizes, and a 1.2 prefix is unchanged.
func TestBootConfigPageSizesOnlyForANewerGuest(t *testing.T) {
	cfg := abi.BootConfig{TreeID: "t", Settings: settings.Settings{StepCap: 5, SessionPageSize: 7, MessagePageSize: 8}}
	old := cfg.EncodeFor(abi.MinorPageSizes - 1)
	cur := cfg.EncodeFor(abi.MinorPageSizes)
	require.Equal(t, old, cur[:len(old)], "the 1.2 fields are unchanged")
	got, err := abi.DecodeBootConfig(old)
	require.NoError(t, err)
	want := cfg
	want.Settings.SessionPageSize, want.Settings.MessagePageSize = 0, 0
	require.Equal(t, want, got)
	_, err = abi.DecodeBootConfig(append(cur, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "a byte past the page sizes")
}

// An egress end carries its code between 1.3 sides and round-trips every
// code; with an older side it is the bare text, which decodes as
// EndError; a clean end is empty either way.
func TestEgressEndCode(t *testing.T) {
	for code := abi.EndError; code <= abi.EndTooLarge; code++ {
		e := abi.EgressEnd{Code: code, Message: "why: " + code.String()}
		got, err := abi.DecodeEgressEnd(e.EncodeFor(abi.MinorEgressEndCode), abi.MinorEgressEndCode)
		require.NoError(t, err)
		require.Equal(t, e, got)

		b := e.EncodeFor(abi.MinorEgressEndCode - 1)
		require.Equal(t, []byte(e.Message), b, "1.2: the text alone")
		got, err = abi.DecodeEgressEnd(b, abi.MinorEgressEndCode-1)
		require.NoError(t, err)
		require.Equal(t, abi.EgressEnd{Code: abi.EndError, Message: e.Message}, got, "1.2 text is an unclassified failure")
	}
	require.Equal(t, "fenced", abi.EndFenced.String())
	require.Equal(t, "too_large", abi.EndTooLarge.String())
	for _, minor := range []uint16{abi.MinorEgressEndCode - 1, abi.MinorEgressEndCode} {
		b := abi.EgressEnd{Message: "ignored"}.EncodeFor(minor)
		require.Empty(t, b, "a clean end passes no buffer")
		got, err := abi.DecodeEgressEnd(b, minor)
		require.NoError(t, err)
		require.Equal(t, abi.EgressEnd{}, got)
	}
	// A code this version does not know is kept, to be treated as a failure.
	var e abi.Encoder
	e.Uvarint(200)
	e.String("later")
	got, err := abi.DecodeEgressEnd(e.Bytes(), abi.MinorEgressEndCode)
	require.NoError(t, err)
	require.Equal(t, abi.EgressEnd{Code: 200, Message: "later"}, got)
	require.Equal(t, "code(200)", got.Code.String())
	// Code 0 with a message, a code past a byte, truncation, trailing bytes.
	for _, b := range [][]byte{{0, 1, 'x'}, {0x80, 0x02, 0}, {2, 5, 'a'}, {2, 0, 0}} {
		_, err := abi.DecodeEgressEnd(b, abi.MinorEgressEndCode)
		require.ErrorIs(t, err, abi.ErrMalformed, "%x", b)
	}
}

func TestEncodingIsDeterministic(t *testing.T) {
	h := httpmsg.Header{}
	for _, k := range []string{"Z", "A", "M", "B", "Y"} {
		h.Set(k, k)
	}
	a := abi.Request{Header: h}.Encode()
	for range 20 {
		require.Equal(t, a, abi.Request{Header: h.Clone()}.Encode())
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	good := abi.Emitted{ID: "e", SessionID: "s", Seq: 1, Type: "t", Data: []byte("d")}.Encode()
	for i := range good {
		_, err := abi.DecodeEmitted(good[:i])
		require.ErrorIs(t, err, abi.ErrMalformed, "prefix %d", i)
	}
	_, err := abi.DecodeEmitted(append(good, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "trailing byte")
	_, err = abi.DecodeResponsePart([]byte{9})
	require.ErrorIs(t, err, abi.ErrMalformed)
	_, err = abi.DecodeResponsePart([]byte{3, 0})
	require.ErrorIs(t, err, abi.ErrMalformed, "a clean end has no field: one encoding per end")
	_, err = abi.DecodeResponsePart([]byte{3, 1, 1})
	require.ErrorIs(t, err, abi.ErrMalformed, "trailing byte after the aborted flag")
	_, err = abi.DecodeStatement([]byte{0, 1, 7})
	require.ErrorIs(t, err, abi.ErrMalformed)
	// A huge count with a short buffer fails without allocating for it.
	_, err = abi.DecodeRows([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	require.ErrorIs(t, err, abi.ErrMalformed)
}

// A count is bounded by the bytes left, not only by maxCount: each element
// takes at least one byte, so a count of 2^24-1 with one byte left fails
// "past the buffer" at once, and a decoder that preallocates by the count
// (a statement's arguments) allocates nothing large for it.
func TestCountPastTheBytesLeftFailsWithoutAllocating(t *testing.T) {
	const huge = 1<<24 - 1
	var e abi.Encoder
	e.Uvarint(huge)
	e.Byte(0)
	d := abi.NewDecoder(e.Bytes())
	require.Zero(t, d.Count())
	require.ErrorIs(t, d.Err(), abi.ErrMalformed)
	require.ErrorContains(t, d.Err(), "past the buffer")

	var s abi.Encoder
	s.String("SELECT ?")
	s.Uvarint(huge)
	s.Byte(0)
	msg := s.Bytes()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := abi.DecodeStatement(msg)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, abi.ErrMalformed)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated decoding a %d-byte statement", len(msg))
	assert.ErrorContains(t, err, "past the buffer")
}

// Header keys travel sorted, each once (docs/abi.md §5), so a header has
// one encoding: a decoder refuses unsorted or repeated keys.
func TestDecodeRejectsUnsortedOrRepeatedHeaderKeys(t *testing.T) {
	header := func(keys ...string) []byte {
		var e abi.Encoder
		e.Uvarint(200) // EgressResponse: status, then the header
		e.Uvarint(uint64(len(keys)))
		for _, k := range keys {
			e.String(k)
			e.Uvarint(1)
			e.String("v")
		}
		return e.Bytes()
	}
	got, err := abi.DecodeEgressResponse(header("A", "B", "a"))
	require.NoError(t, err, "sorted byte-wise")
	require.Equal(t, httpmsg.Header{"A": {"v"}, "B": {"v"}, "a": {"v"}}, got.Header)
	for _, keys := range [][]string{{"B", "A"}, {"A", "A"}, {"A", "C", "B"}, {"a", "B"}, {"", ""}} {
		_, err := abi.DecodeEgressResponse(header(keys...))
		require.ErrorIs(t, err, abi.ErrMalformed, "keys %q", keys)
	}
	// The same through every message with a header.
	unsorted := header("B", "A")[2:] // without the status
	var e abi.Encoder
	e.String("GET")
	e.String("/")
	e.String("")
	req := append(e.Bytes(), unsorted...)
	req = append(req, 0) // empty body
	_, err = abi.DecodeRequest(req)
	require.ErrorIs(t, err, abi.ErrMalformed)
	_, err = abi.DecodeResponsePart(append([]byte{byte(abi.PartHead), 200, 1}, unsorted...))
	require.ErrorIs(t, err, abi.ErrMalformed)
}

// The epoch (ABI 1.2) is EgressRequest's last field, present only when
// the guest sends it: a request without it decodes as before, and one with
// it round-trips, epoch 0 ("no epoch yet") included.
func TestEgressRequestEpoch(t *testing.T) {
	base := abi.EgressRequest{Kind: abi.EgressModel, Method: "POST", URL: "http://m/v1/chat/completions", Header: httpmsg.Header{}, Body: []byte("{}")}
	got, err := abi.DecodeEgressRequest(base.Encode())
	require.NoError(t, err)
	require.Equal(t, base, got)
	require.False(t, got.HasEpoch, "a 1.1 layout carries no epoch")

	for _, epoch := range []int64{abi.NoEpoch, 1, 300, 1 << 40} {
		r := base
		r.Epoch, r.HasEpoch = epoch, true
		b := r.Encode()
		require.Greater(t, len(b), len(base.Encode()), "the epoch is appended")
		require.Equal(t, base.Encode(), b[:len(base.Encode())], "the 1.1 fields are unchanged")
		got, err := abi.DecodeEgressRequest(b)
		require.NoError(t, err)
		require.Equal(t, r, got)
		_, err = abi.DecodeEgressRequest(append(b, 0))
		require.ErrorIs(t, err, abi.ErrMalformed, "a byte past the epoch")
	}
	// Overlong or out-of-range epochs are refused.
	for _, tail := range [][]byte{{0x80, 0x00}, {0x80}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		_, err := abi.DecodeEgressRequest(append(base.Encode(), tail...))
		require.ErrorIs(t, err, abi.ErrMalformed, "tail %x", tail)
	}
}

func TestVersionPacking(t *testing.T) {
	v := abi.PackVersion(abi.Major, abi.Minor)
	major, minor := abi.UnpackVersion(v)
	require.Equal(t, uint16(abi.Major), major)
	require.Equal(t, uint16(abi.Minor), minor)
}

// FuzzDecode feeds arbitrary bytes to every decoder: none may panic, and
// whatever decodes must re-encode to something that decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add(abi.Request{Method: "GET", Path: "/"}.Encode())
	f.Add(abi.BootConfig{TreeID: "t"}.Encode())
	b, _ := abi.Rows{Columns: []string{"a"}, Values: [][]any{{int64(1)}}}.Encode()
	f.Add(b)
	b, _ = abi.Statement{Query: "q", Args: []any{"x", 1.5}}.Encode()
	f.Add(b)
	f.Add(abi.Emitted{ID: "e", Seq: 1}.Encode())
	f.Add(abi.EgressRequest{Kind: abi.EgressTool, Target: "t", Epoch: 7, HasEpoch: true}.Encode())
	f.Add(abi.EgressEnd{Code: abi.EndFenced, Message: "fenced"}.EncodeFor(abi.MinorEgressEndCode))
	f.Add(abi.EgressResponse{Status: 200, Header: httpmsg.Header{"A": {"1"}, "B": {"2", "3"}}}.Encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := abi.DecodeRequest(data); err == nil {
			r2, err := abi.DecodeRequest(r.Encode())
			require.NoError(t, err)
			require.Equal(t, r.Encode(), r2.Encode())
		}
		if p, err := abi.DecodeResponsePart(data); err == nil {
			_, err := abi.DecodeResponsePart(p.Encode())
			require.NoError(t, err)
		}
		if r, err := abi.DecodeEgressRequest(data); err == nil {
			r2, err := abi.DecodeEgressRequest(r.Encode())
			require.NoError(t, err)
			require.Equal(t, r.HasEpoch, r2.HasEpoch)
			require.Equal(t, r.Epoch, r2.Epoch)
		}
		if r, err := abi.DecodeEgressResponse(data); err == nil {
			// One encoding per header: what decodes re-encodes to itself.
			require.Equal(t, data, r.Encode())
		}
		if c, err := abi.DecodeToolCall(data); err == nil {
			c2, err := abi.DecodeToolCall(c.Encode())
			require.NoError(t, err)
			require.Equal(t, c.Encode(), c2.Encode())
		}
		if e, err := abi.DecodeEmitted(data); err == nil {
			require.Equal(t, data, e.Encode())
		}
		if s, err := abi.DecodeStatement(data); err == nil {
			b, err := s.Encode()
			require.NoError(t, err)
			_, err = abi.DecodeStatement(b)
			require.NoError(t, err)
		}
		if r, err := abi.DecodeRows(data); err == nil {
			b, err := r.Encode()
			require.NoError(t, err)
			_, err = abi.DecodeRows(b)
			require.NoError(t, err)
		}
		_, _ = abi.DecodeSQLError(data)
		if e, err := abi.DecodeEgressEnd(data, abi.MinorEgressEndCode); err == nil {
			got, err := abi.DecodeEgressEnd(e.EncodeFor(abi.MinorEgressEndCode), abi.MinorEgressEndCode)
			require.NoError(t, err)
			require.Equal(t, e, got)
		}
		if c, err := abi.DecodeBootConfig(data); err == nil {
			_, err := abi.DecodeBootConfig(c.Encode())
			require.NoError(t, err)
		}
	})
}

// docs/abi.md is the ABI's specification: it names this version and every
// export and import.
func TestSpecNamesVersionAndEveryFunction(t *testing.T) {
	spec, err := os.ReadFile("../../docs/abi.md")
	require.NoError(t, err)
	doc := string(spec)
	require.Contains(t, doc, fmt.Sprintf("# revenant guest ABI, version %d.%d\n", abi.Major, abi.Minor))
	require.Contains(t, doc, fmt.Sprintf("| %d.%d |", abi.Major, abi.Minor), "the versions table")
	for _, name := range []string{
		abi.ExportVersion, abi.ExportAlloc, abi.ExportFree, abi.ExportBoot, abi.ExportRequest,
		abi.ExportCancelRequest, abi.ExportWake, abi.ExportTimer, abi.ExportEgressResponse,
		abi.ExportEgressChunk, abi.ExportEgressEnd, abi.ExportPump, abi.ExportShutdown,
		abi.ExportIdle, abi.ExportDiagSQL,
		abi.ImportSQLBegin, abi.ImportSQLExec, abi.ImportSQLQuery, abi.ImportSQLCommit,
		abi.ImportSQLRollback, abi.ImportResult, abi.ImportClockNow, abi.ImportTimerSet,
		abi.ImportTimerClear, abi.ImportWakeArm, abi.ImportWakeClear, abi.ImportEgressStart,
		abi.ImportEgressCancel, abi.ImportEmit, abi.ImportRespond, abi.ImportRandom, abi.ImportLog,
		abi.ImportPhase, abi.ImportFail, abi.ImportWakeArmChecked,
	} {
		require.Contains(t, doc, "| `"+name+"` |", "a row for %s", name)
	}
}

// The permission configuration (1.4) follows the page sizes and goes only
// to a guest of 1.4 or later; it round-trips, and a count that does not
// match the tools is malformed.
func TestBootConfigPermissionsOnlyForANewerGuest(t *testing.T) {
	cfg := abi.BootConfig{TreeID: "t", Settings: settings.Settings{SessionPageSize: 7, MessagePageSize: 8},
		Tools:       []abi.ToolDecl{{Kind: abi.ToolWebhook, Name: "deploy", Permission: "deny"}, {Kind: abi.ToolHTTPRequest, Name: "http_request"}},
		Permissions: []permission.Rule{{Action: "kv_put", Resource: "kv:secret*", Decision: permission.Ask}, {Action: "t", Resource: "a*b", Decision: permission.Allow, Exact: true}}}
	old := cfg.EncodeFor(abi.MinorPermissions - 1)
	cur := cfg.EncodeFor(abi.MinorPermissions)
	require.Equal(t, old, cur[:len(old)], "the 1.3 fields are unchanged")
	got, err := abi.DecodeBootConfig(cur)
	require.NoError(t, err)
	require.Equal(t, cfg, got)
	got, err = abi.DecodeBootConfig(old)
	require.NoError(t, err)
	require.Nil(t, got.Permissions)
	require.Empty(t, got.Tools[0].Permission, "an older host's tools ask")
	_, err = abi.DecodeBootConfig(append(old, 1, 0, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "one tool permission for two tools")
}

// The queue cap (1.7) follows the permission configuration and goes only
// to a guest of 1.7 or later; an older guest decodes the 1.6 layout and
// keeps its default cap.
func TestBootConfigQueueCapOnlyForANewerGuest(t *testing.T) {
	cfg := abi.BootConfig{TreeID: "t", Settings: settings.Settings{QueueCap: 7, SessionPageSize: 8},
		Tools: []abi.ToolDecl{{Kind: abi.ToolHTTPRequest, Name: "http_request", Permission: "allow"}}}
	requireLastFieldOnlyForANewerGuest(t, cfg, abi.MinorQueueCap, func(c *abi.BootConfig) { c.Settings.QueueCap = 0 })
}

// requireLastFieldOnlyForANewerGuest checks a field that minor added last
// to BootConfig: cfg encoded for the minor before it is the same bytes as
// for minor without their end, decodes as cfg without the field (clear
// sets it to what an older guest keeps), and a byte past the field is
// malformed.
func requireLastFieldOnlyForANewerGuest(t *testing.T, cfg abi.BootConfig, minor uint16, clear func(*abi.BootConfig)) {
	t.Helper()
	old := cfg.EncodeFor(minor - 1)
	cur := cfg.EncodeFor(minor)
	require.Equal(t, old, cur[:len(old)], "the older fields are unchanged")
	got, err := abi.DecodeBootConfig(cur)
	require.NoError(t, err)
	require.Equal(t, cfg, got)
	got, err = abi.DecodeBootConfig(old)
	require.NoError(t, err)
	want := cfg
	clear(&want)
	require.Equal(t, want, got)
	_, err = abi.DecodeBootConfig(append(cur, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "a byte past the new field")
}

// The operator's policy (1.8) follows the queue cap and goes only to a
// guest of 1.8 or later: each rule's final flag, then the allowed models
// (nil for any, which stays nil; an empty list, no model, stays empty). An older guest decodes the 1.7 layout,
// without them; a flag count that does not match the rules is malformed.
func TestBootConfigOperatorPolicyOnlyForANewerGuest(t *testing.T) {
	cfg := abi.BootConfig{TreeID: "t", Settings: settings.Settings{QueueCap: 7},
		Permissions: []permission.Rule{{Action: "deploy", Resource: "*", Decision: permission.Ask, Final: true},
			{Action: "kv_put", Resource: "*", Decision: permission.Ask}},
		AllowedModels: []string{"gpt-4o-mini", "gpt-4o"}}
	old := cfg.EncodeFor(abi.MinorOperatorPolicy - 1)
	cur := cfg.EncodeFor(abi.MinorOperatorPolicy)
	require.Equal(t, old, cur[:len(old)], "the 1.7 fields are unchanged")
	got, err := abi.DecodeBootConfig(cur)
	require.NoError(t, err)
	require.Equal(t, cfg, got)
	got, err = abi.DecodeBootConfig(old)
	require.NoError(t, err)
	require.False(t, got.Permissions[0].Final, "an older host sends no final flag")
	require.Nil(t, got.AllowedModels)

	anyModel := cfg
	anyModel.AllowedModels = nil
	got, err = abi.DecodeBootConfig(anyModel.Encode())
	require.NoError(t, err)
	require.Nil(t, got.AllowedModels, "no list stays no list: any model")
	noModel := cfg
	noModel.AllowedModels = []string{}
	got, err = abi.DecodeBootConfig(noModel.Encode())
	require.NoError(t, err)
	require.NotNil(t, got.AllowedModels, "an empty list stays a list: no model, not any")
	require.Empty(t, got.AllowedModels)

	_, err = abi.DecodeBootConfig(append(old, 1, 1, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "one final flag for two rules")
	_, err = abi.DecodeBootConfig(append(old, 3, 1, 0, 0, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "three final flags for two rules")
	_, err = abi.DecodeBootConfig(append(cur, 0, 0, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "a byte past the allowed models, the 1.9 drain flag and the 1.10 sub-agent limit")
}

// The drain flag (1.9) follows the operator's policy and goes only to a
// guest of 1.9 or later; an older guest decodes the 1.8 layout, and never
// drains.
func TestBootConfigDrainOnlyForANewerGuest(t *testing.T) {
	cfg := abi.BootConfig{TreeID: "t", Drain: true, AllowedModels: []string{"m"}}
	old := cfg.EncodeFor(abi.MinorDrain - 1)
	cur := cfg.EncodeFor(abi.MinorDrain)
	require.Equal(t, old, cur[:len(old)], "the 1.8 fields are unchanged")
	got, err := abi.DecodeBootConfig(cur)
	require.NoError(t, err)
	require.Equal(t, cfg, got)
	got, err = abi.DecodeBootConfig(old)
	require.NoError(t, err)
	require.False(t, got.Drain, "an older host acknowledges no drain")
	_, err = abi.DecodeBootConfig(append(cur, 0, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "a byte past the drain flag and the 1.10 sub-agent limit")
}

// The sub-agent limit (1.10) follows the drain flag and goes only to a
// guest of 1.10 or later; an older guest decodes the 1.9 layout and has
// no such limit.
func TestBootConfigMaxSubagentsOnlyForANewerGuest(t *testing.T) {
	cfg := abi.BootConfig{TreeID: "t", Drain: true, Settings: settings.Settings{MaxSubagents: 5, QueueCap: 7}}
	requireLastFieldOnlyForANewerGuest(t, cfg, abi.MinorMaxSubagents, func(c *abi.BootConfig) { c.Settings.MaxSubagents = 0 })
}

// Names hands out one string per column name across results, up to its
// bound, and decodes the same rows as DecodeRows.
func TestDecodeRowsNames(t *testing.T) {
	b, err := abi.Rows{Columns: []string{"session_id", "seq"}, Values: [][]any{{"s", int64(7)}, {nil, int64(300)}}}.Encode()
	require.NoError(t, err)
	var names abi.Names
	first, err := abi.DecodeRowsNames(b, &names)
	require.NoError(t, err)
	plain, err := abi.DecodeRows(b)
	require.NoError(t, err)
	require.Equal(t, plain, first)
	again, err := abi.DecodeRowsNames(b, &names)
	require.NoError(t, err)
	require.Same(t, unsafe.StringData(first.Columns[0]), unsafe.StringData(again.Columns[0]), "interned")
	require.NotSame(t, unsafe.StringData(plain.Columns[0]), unsafe.StringData(first.Columns[0]))
}

// ToolCall's rules (1.5) follow the session id and go only to a host of
// 1.5 or later: they round-trip, a 1.4 message (no tail) still decodes,
// to no rules, and a tail with one list of the two is malformed.
func TestToolCallRulesOnlyForANewerHost(t *testing.T) {
	call := abi.ToolCall{ID: "c", Name: "http_request", Arguments: []byte(`{"url":"http://a.example"}`), IdempotencyKey: "k", SessionID: "s",
		SessionRules: []permission.Rule{{Action: "http_request", Resource: "http:b.example", Decision: permission.Deny}},
		SavedRules:   []permission.Rule{{Action: "http_request", Resource: "http:c.example", Decision: permission.Allow, Exact: true}}}
	cur := call.EncodeFor(abi.MinorToolCallRules)
	require.Equal(t, cur, call.Encode(), "this version sends the rules")
	got, err := abi.DecodeToolCall(cur)
	require.NoError(t, err)
	require.Equal(t, call, got)

	old := call.EncodeFor(abi.MinorToolCallRules - 1)
	require.Equal(t, old, cur[:len(old)], "the 1.4 fields are unchanged")
	got, err = abi.DecodeToolCall(old)
	require.NoError(t, err)
	want := call
	want.SessionRules, want.SavedRules = nil, nil
	require.Equal(t, want, got, "an older guest's call carries no rules")

	none := abi.ToolCall{ID: "c", Name: "n"}
	got, err = abi.DecodeToolCall(none.Encode())
	require.NoError(t, err)
	require.Equal(t, none, got, "empty lists decode as none")

	_, err = abi.DecodeToolCall(append(old, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "the session's rules without the saved ones")
	_, err = abi.DecodeToolCall(append(old, 1, 0, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "a truncated rule")
	_, err = abi.DecodeToolCall(append(cur, 0))
	require.ErrorIs(t, err, abi.ErrMalformed, "trailing bytes after the rules")
}
