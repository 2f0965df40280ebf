package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// GuestMinor is the ABI minor version the module's guests announce, read
// once from a probe instance (never booted: it touches no database) and
// kept.
func (m *Module) GuestMinor(ctx context.Context) (uint16, error) {
	m.probeMu.Lock()
	defer m.probeMu.Unlock()
	if m.probed {
		return m.minor, nil
	}
	g, err := m.Instantiate(ctx, Options{Conn: probe{}, Services: probe{}})
	if err != nil {
		return 0, err
	}
	m.minor, m.probed = g.guestMinor, true
	return m.minor, g.Close(ctx)
}

// CheckBoot reports, before any tree boots, whether the module's guests can
// boot with cfg: a guest too old for it (checkBootFits: a final rule
// or an allowed-models list before 1.8, rules before 1.4, a max_subagents
// before 1.10) is ErrVersion,
// which Boot would answer for every tree. A server checks at start-up, so
// that it refuses to start rather than fail every request.
func (m *Module) CheckBoot(ctx context.Context, cfg BootConfig) error {
	minor, err := m.GuestMinor(ctx)
	if err != nil {
		return err
	}
	if err := checkBootFits(cfg, minor); err != nil {
		return fmt.Errorf("this guest cannot enforce the server's configuration: %w", err)
	}
	return nil
}

// BootWarnings lists what the module's guests lack that the server's
// defaults would have them do, for a server to log at start-up: what an
// operator set and they cannot do, CheckBoot refuses. A guest older than
// ABI 1.10 bounds a tree's sub-agents by depth alone, with no
// max_subagents (its default, 64, included).
func (m *Module) BootWarnings(ctx context.Context) []string {
	minor, err := m.GuestMinor(ctx)
	if err != nil || minor >= abi.MinorMaxSubagents {
		return nil // an unreadable version is CheckBoot's to report
	}
	return []string{fmt.Sprintf("the guest speaks ABI 1.%d, which does not carry max_subagents (1.%d does): its trees' sub-agents are bounded by depth alone; rebuild the guest", minor, abi.MinorMaxSubagents)}
}

// probe is the Conn and Services of the instance GuestMinor reads the
// version from: it is never booted, so nothing here is called but the
// clock and randomness the Go runtime reads at start.
type probe struct{}

var errProbe = errors.New("a probe guest has no database")

func (probe) Begin() error                               { return errProbe }
func (probe) Exec(string, []any) (int64, error)          { return 0, errProbe }
func (probe) Query(string, []any) (*storage.Rows, error) { return nil, errProbe }
func (probe) Commit() error                              { return errProbe }
func (probe) Rollback() error                            { return nil }
func (probe) InTx() bool                                 { return false }
func (probe) Now() int64                                 { return 0 }
func (probe) SetTimer(uint64, int64)                     {}
func (probe) ClearTimer(uint64)                          {}
func (probe) ArmWake(int64) error                        { return errProbe }
func (probe) ClearWake()                                 {}
func (probe) StartEgress(uint64, EgressRequest)          {}
func (probe) CancelEgress(uint64)                        {}
func (probe) Emit(Emitted)                               {}
func (probe) Respond(uint64, ResponsePart)               {}
func (probe) Random(p []byte)                            { clear(p) }
