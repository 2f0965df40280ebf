package abi

import (
	"fmt"
	"time"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Version of the ABI. A host and a guest talk only if their major versions
// are equal; a minor version adds things the other side may ignore.
const (
	Major = 1
	// Minor 1 added ExportIdle and ExportDiagSQL; 2 added EgressRequest.Epoch;
	// 3 added EgressEnd's code and BootConfig's page sizes; 4 added
	// BootConfig's permission configuration; 5 added ToolCall's session
	// and saved rules, so the host decides a running call's redirects by
	// the session's whole policy; 6 added ImportWakeArmChecked, so a
	// wake-up the host cannot store fails the guest's write instead of
	// trapping the guest; 7 added BootConfig's queue cap; 8 added
	// BootConfig's operator policy (final rules, allowed models); 9 added
	// PartDrain and BootConfig.Drain, so an event
	// stream's catch-up waits for its client page by page; 10 added
	// BootConfig's sub-agent limit (max_subagents); 11 added the aborted
	// end (ResponsePart.Aborted), so a response cut short after its head
	// is cut for its client too, not ended as if complete.
	Minor = 11
)

// MinorAbort is the minor version that added ResponsePart.Aborted: the
// guest sends an aborted end only to a host that announced at least this
// (BootConfig's host version); to an older one its end stays clean.
const MinorAbort = 11

// MinorWakeArmChecked is the minor version that added ImportWakeArmChecked.
// A guest of this version imports it, so it needs a host of this version
// or later.
const MinorWakeArmChecked = 6

// PackVersion packs a version the way revenant_abi_version returns it:
// major in the high 16 bits, minor in the low 16.
func PackVersion(major, minor uint16) uint32 { return uint32(major)<<16 | uint32(minor) }

// UnpackVersion splits a packed version.
func UnpackVersion(v uint32) (major, minor uint16) { return uint16(v >> 16), uint16(v) }

// Status is what every export returns (an i32).
type Status int32

const (
	// StatusIdle: the guest is quiescent, every guest goroutine waits on a
	// host event (an export call).
	StatusIdle Status = 0
	// StatusPending: the export stopped running the scheduler before the
	// guest was quiescent; the host calls revenant_pump until StatusIdle.
	StatusPending Status = 1
	// StatusError: the export failed; its message was passed to the fail
	// import just before returning. The guest is still usable unless the
	// host decides otherwise (a failed boot leaves it unbooted).
	StatusError Status = 2
	// StatusVersion: boot refused the host's major ABI version.
	StatusVersion Status = 3
	// StatusNotBooted: an export other than boot was called before a
	// successful boot.
	StatusNotBooted Status = 4
)

func (s Status) String() string {
	switch s {
	case StatusIdle:
		return "idle"
	case StatusPending:
		return "pending"
	case StatusError:
		return "error"
	case StatusVersion:
		return "version refused"
	case StatusNotBooted:
		return "not booted"
	}
	return fmt.Sprintf("status(%d)", int32(s))
}

// Answers of ExportIdle, besides StatusNotBooted before a successful boot.
const (
	NotIdle int32 = 0 // an execution runs in the guest
	IsIdle  int32 = 1 // no execution runs: closing the guest loses nothing only its memory holds
)

// Phase is what the guest is doing, announced through the phase import.
type Phase uint8

const (
	PhaseNone  Phase = 0 // instantiated, not yet booting
	PhaseBoot  Phase = 1 // migrations and the new epoch
	PhaseSweep Phase = 2 // the boot or wake sweep and the re-arm
	PhaseServe Phase = 3 // serving requests and running turns
)

func (p Phase) String() string {
	switch p {
	case PhaseNone:
		return "none"
	case PhaseBoot:
		return "boot"
	case PhaseSweep:
		return "sweep"
	case PhaseServe:
		return "serve"
	}
	return fmt.Sprintf("phase(%d)", p)
}

// Result tags: the first byte of every import result the guest takes with
// the result import.
const (
	ResultOK    byte = 0
	ResultError byte = 1
)

// Value tags of SQL arguments and result values.
const (
	ValueNull  byte = 0
	ValueInt   byte = 1
	ValueFloat byte = 2
	ValueText  byte = 3
	ValueBlob  byte = 4
)

// PartKind says what a ResponsePart carries.
type PartKind uint8

const (
	PartHead PartKind = 1 // Status and Header; exactly once, first
	PartBody PartKind = 2 // Body bytes, in order
	PartEnd  PartKind = 3 // the response is complete (or, Aborted, cut short); nothing follows
	// PartDrain (since 1.9, MinorDrain, only to a host that set
	// BootConfig.Drain) asks the host to fire timer Timer (ExportTimer)
	// once the client took every body part sent before it.
	PartDrain PartKind = 4
)

// EgressKind says who an egress request is for, so the host can apply the
// right credentials and policy. Secrets never enter the guest: the host adds
// the provider's key and signs webhook bodies.
type EgressKind uint8

const (
	// EgressModel is a request to the configured model provider. URL must
	// be the provider's chat completions endpoint; the host adds the key.
	EgressModel EgressKind = 1
	// EgressTool runs the HTTP side of the tool named Target with the
	// call in Body (EncodeToolCall); the host performs the request under
	// the tools' egress policy and answers 200 with the tool's output, or
	// ends with the tool's error.
	EgressTool EgressKind = 2
)

// EndCode says how an egress answer ended (EgressEnd, since ABI 1.3). A
// host picks the most specific code it can tell; EndError when it cannot.
type EndCode uint8

const (
	// EndOK: the body ended cleanly.
	EndOK EndCode = 0
	// EndError: the request failed for a reason the host does not
	// classify, such as a tool's own error (its message is the tool's
	// output) or any failure from a host older than 1.3.
	EndError EndCode = 1
	// EndFenced: the host's epoch fence refused the request (docs/abi.md
	// §4): a newer instance owns the tree, or this one holds no epoch, or
	// the epoch could not be read. Nothing was sent.
	EndFenced EndCode = 2
	// EndNetwork: the request could not be sent, or the connection broke
	// while the answer streamed.
	EndNetwork EndCode = 3
	// EndTimeout: the host's deadline for the request passed.
	EndTimeout EndCode = 4
	// EndCancelled: the host abandoned the request (it is shutting down).
	EndCancelled EndCode = 5
	// EndDenied: the host's egress policy refused the destination, or the
	// URL is not the configured model endpoint. Nothing was sent.
	EndDenied EndCode = 6
	// EndTooLarge: the answer exceeded the host's size cap.
	EndTooLarge EndCode = 7
)

var endCodeNames = [...]string{"ok", "error", "fenced", "network", "timeout", "cancelled", "denied", "too_large"}

func (c EndCode) String() string {
	if int(c) < len(endCodeNames) {
		return endCodeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// encodeHeader encodes a header with its keys sorted, so encodings repeat.
func encodeHeader(e *Encoder, h httpmsg.Header) {
	keys := h.Keys()
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.String(k)
		e.Uvarint(uint64(len(h[k])))
		for _, v := range h[k] {
			e.String(v)
		}
	}
}

// decodeHeader reads a header as encodeHeader writes it: keys in strictly
// increasing byte order, so each key once and each header one encoding.
func decodeHeader(d *Decoder) httpmsg.Header {
	n := d.Count()
	if n == 0 {
		return httpmsg.Header{}
	}
	h := make(httpmsg.Header, n)
	prev := ""
	for i := range n {
		k := d.String()
		if d.err != nil {
			return h
		}
		if i > 0 && k <= prev {
			d.fail("header key %q after %q: keys must be sorted, each once", k, prev)
			return h
		}
		prev = k
		m := d.Count()
		vs := make([]string, 0, m)
		for range m {
			vs = append(vs, d.String())
		}
		h[k] = vs
	}
	return h
}

func duration(d *Decoder) time.Duration { return time.Duration(d.Varint()) }
