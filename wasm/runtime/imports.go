package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/revenantrt/revenant/wasm/abi"
)

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

type hostFn struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
	fn      func(g *Guest, ctx context.Context, mod api.Module, stack []uint64)
}

// instantiateImports registers the revenant import module once per runtime.
// The functions find their guest in the call's context, so one module
// serves every instance.
func instantiateImports(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(abi.ImportModule)
	for _, h := range hostFns {
		h := h
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			interrupted(ctx, mod)
			h.fn(guestFrom(ctx), ctx, mod, stack)
		}), h.params, h.results).Export(h.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

var hostFns = []hostFn{
	{abi.ImportSQLBegin, nil, []api.ValueType{i32}, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportSQLBegin, false)
		res := sqlBegin(g.opts.Conn)
		g.interpose(ctx, mod, abi.ImportSQLBegin, true)
		stack[0] = g.setResult(res)
	}},
	{abi.ImportSQLExec, []api.ValueType{i32, i32}, []api.ValueType{i32}, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		st := decodeStatement(g.read(mod, stack[0], stack[1]))
		g.interpose(ctx, mod, abi.ImportSQLExec, false)
		res := sqlExec(g.opts.Conn, st)
		g.interpose(ctx, mod, abi.ImportSQLExec, true)
		stack[0] = g.setResult(res)
	}},
	{abi.ImportSQLQuery, []api.ValueType{i32, i32}, []api.ValueType{i32}, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		st := decodeStatement(g.read(mod, stack[0], stack[1]))
		g.interpose(ctx, mod, abi.ImportSQLQuery, false)
		res := sqlQuery(g.opts.Conn, st)
		g.interpose(ctx, mod, abi.ImportSQLQuery, true)
		stack[0] = g.setResult(res)
	}},
	{abi.ImportSQLCommit, nil, []api.ValueType{i32}, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportSQLCommit, false)
		res := sqlCommit(g.opts.Conn)
		g.interpose(ctx, mod, abi.ImportSQLCommit, true)
		stack[0] = g.setResult(res)
	}},
	{abi.ImportSQLRollback, nil, []api.ValueType{i32}, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportSQLRollback, false)
		res := sqlRollback(g.opts.Conn)
		g.interpose(ctx, mod, abi.ImportSQLRollback, true)
		stack[0] = g.setResult(res)
	}},
	{abi.ImportResult, []api.ValueType{i32}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		if !mod.Memory().Write(api.DecodeU32(stack[0]), g.result) {
			panic(fmt.Errorf("result: %d bytes at %#x out of range", len(g.result), api.DecodeU32(stack[0])))
		}
		g.result = nil
	}},
	{abi.ImportClockNow, nil, []api.ValueType{i64}, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportClockNow, false)
		stack[0] = uint64(g.opts.Services.Now())
		g.interpose(ctx, mod, abi.ImportClockNow, true)
	}},
	{abi.ImportTimerSet, []api.ValueType{i64, i64}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportTimerSet, false)
		g.opts.Services.SetTimer(stack[0], int64(stack[1]))
		g.interpose(ctx, mod, abi.ImportTimerSet, true)
	}},
	{abi.ImportTimerClear, []api.ValueType{i64}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportTimerClear, false)
		g.opts.Services.ClearTimer(stack[0])
		g.interpose(ctx, mod, abi.ImportTimerClear, true)
	}},
	{abi.ImportWakeArm, []api.ValueType{i64}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportWakeArm, false)
		if err := g.opts.Services.ArmWake(int64(stack[0])); err != nil {
			// A guest older than 1.6 cannot hear of the failure and must
			// not commit the claim the wake-up was armed for: the trap
			// fails its call, and its transaction is rolled back.
			panic(fmt.Errorf("store the guest's wake-up: %w", err))
		}
		g.interpose(ctx, mod, abi.ImportWakeArm, true)
	}},
	{abi.ImportWakeArmChecked, []api.ValueType{i64}, []api.ValueType{i32}, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportWakeArmChecked, false)
		code := wakeArmCode(g.opts.Services.ArmWake(int64(stack[0])))
		g.interpose(ctx, mod, abi.ImportWakeArmChecked, true)
		stack[0] = api.EncodeI32(code)
	}},
	{abi.ImportWakeClear, nil, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportWakeClear, false)
		g.opts.Services.ClearWake()
		g.interpose(ctx, mod, abi.ImportWakeClear, true)
	}},
	{abi.ImportEgressStart, []api.ValueType{i64, i32, i32}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		req, err := abi.DecodeEgressRequest(g.read(mod, stack[1], stack[2]))
		if err != nil {
			panic(fmt.Errorf("egress_start: %w", err))
		}
		g.interpose(ctx, mod, abi.ImportEgressStart, false)
		if msg := g.fence(req); msg != "" {
			g.log.Warn("wasm guest egress refused", "id", stack[0], "kind", req.Kind, "target", req.Target, "code", abi.EndFenced, "reason", msg)
			g.fenced = append(g.fenced, fencedEgress{id: stack[0], msg: msg})
		} else {
			g.opts.Services.StartEgress(stack[0], req)
		}
		g.interpose(ctx, mod, abi.ImportEgressStart, true)
	}},
	{abi.ImportEgressCancel, []api.ValueType{i64}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.interpose(ctx, mod, abi.ImportEgressCancel, false)
		if !g.dropFenced(stack[0]) {
			g.opts.Services.CancelEgress(stack[0])
		}
		g.interpose(ctx, mod, abi.ImportEgressCancel, true)
	}},
	{abi.ImportEmit, []api.ValueType{i32, i32}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		ev, err := abi.DecodeEmitted(g.read(mod, stack[0], stack[1]))
		if err != nil {
			panic(fmt.Errorf("emit: %w", err))
		}
		g.interpose(ctx, mod, abi.ImportEmit, false)
		g.opts.Services.Emit(ev)
		g.interpose(ctx, mod, abi.ImportEmit, true)
	}},
	{abi.ImportRespond, []api.ValueType{i64, i32, i32}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		part, err := abi.DecodeResponsePart(g.read(mod, stack[1], stack[2]))
		if err != nil {
			panic(fmt.Errorf("respond: %w", err))
		}
		g.interpose(ctx, mod, abi.ImportRespond, false)
		g.opts.Services.Respond(stack[0], part)
		g.interpose(ctx, mod, abi.ImportRespond, true)
	}},
	{abi.ImportRandom, []api.ValueType{i32, i32}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		// Check the range before allocating: the length is the guest's.
		ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
		if uint64(ptr)+uint64(n) > uint64(mod.Memory().Size()) {
			panic(errors.New("random: out of range"))
		}
		p := make([]byte, n)
		g.opts.Services.Random(p)
		if !mod.Memory().Write(ptr, p) {
			panic(errors.New("random: out of range"))
		}
	}},
	{abi.ImportLog, []api.ValueType{i32, i32, i32}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		msg := string(g.read(mod, stack[1], stack[2]))
		g.log.Log(ctx, slog.Level(api.DecodeI32(stack[0])), msg)
	}},
	{abi.ImportPhase, []api.ValueType{i32}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.phase = Phase(api.DecodeU32(stack[0]))
	}},
	{abi.ImportFail, []api.ValueType{i32, i32}, nil, func(g *Guest, ctx context.Context, mod api.Module, stack []uint64) {
		g.failMsg = string(g.read(mod, stack[0], stack[1]))
	}},
}

// Messages of the egress ends the epoch fence delivers (docs/abi.md §4).
const (
	fencedSuperseded = "fenced: a newer instance owns this tree"
	fencedNoEpoch    = "fenced: this instance holds no epoch yet"
	fencedUnread     = "fenced: the tree's epoch could not be read"
)

// fence is the epoch check on egress (DESIGN §2, §15 "zombie egress"): the
// host owns egress, so it performs a request only for the instance whose
// epoch the tree still holds. It returns why req is refused, or "" to
// start it. A request without an epoch (a guest before ABI 1.2, or a host
// that announced an older version) cannot be checked and goes out, as
// before; core's write fence still stops such an instance at its next
// write. The guest starts egress outside its transactions, but the check
// reads inside one if it is open (its own writes are no epoch change);
// otherwise in a transaction of its own, rolled back.
func (g *Guest) fence(req abi.EgressRequest) string {
	if !req.HasEpoch {
		return ""
	}
	if req.Epoch == abi.NoEpoch {
		// It booted read-only and has written nothing, so nothing it could
		// ask for is owed; and the epoch it found at boot is its
		// predecessor's, so it has no epoch of its own to check against.
		return fencedNoEpoch
	}
	cur, err := g.treeEpoch()
	if err != nil {
		return fmt.Sprintf("%s: %v", fencedUnread, err)
	}
	if cur != req.Epoch {
		return fmt.Sprintf("%s (its epoch %d, this instance's %d)", fencedSuperseded, cur, req.Epoch)
	}
	return ""
}

// dropFenced forgets the owed end of a refused request the guest abandons
// before it is delivered (egress_cancel: nothing more is sent for id), and
// reports whether id was one; the Services never heard of it.
func (g *Guest) dropFenced(id uint64) bool {
	for i, f := range g.fenced {
		if f.id == id {
			g.fenced = append(g.fenced[:i:i], g.fenced[i+1:]...)
			return true
		}
	}
	return false
}

// treeEpoch reads the tree's epoch on the guest's Conn.
func (g *Guest) treeEpoch() (epoch int64, err error) {
	c := g.opts.Conn
	if !c.InTx() {
		if err := c.Begin(); err != nil {
			return 0, err
		}
		defer func() {
			if rerr := c.Rollback(); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	rows, err := c.Query(`SELECT epoch FROM tree`, nil)
	if err != nil {
		return 0, err
	}
	if len(rows.Values) != 1 || len(rows.Values[0]) != 1 {
		return 0, fmt.Errorf("%d rows in table tree", len(rows.Values))
	}
	e, ok := rows.Values[0][0].(int64)
	if !ok {
		return 0, fmt.Errorf("epoch %v is no integer", rows.Values[0][0])
	}
	return e, nil
}

// read returns a copy of guest memory [ptr, ptr+n).
func (g *Guest) read(mod api.Module, ptr, n uint64) []byte {
	b, ok := mod.Memory().Read(api.DecodeU32(ptr), api.DecodeU32(n))
	if !ok {
		panic(fmt.Errorf("read %d bytes at %#x: out of range", n, ptr))
	}
	return append([]byte(nil), b...)
}

// setResult keeps an import's result for the result import and returns its
// length; 0 means "ok, nothing to take".
func (g *Guest) setResult(res []byte) uint64 {
	g.result = res
	return uint64(len(res))
}

// interrupted stops the guest at an import once the call's context is done
// (its watchdog fired, or the caller cancelled it), as wazero's
// close-on-context-done would at a loop: the module closes with the exit
// code wazero uses, so the call fails the same way (Guest.failed). A guest
// closed from another goroutine (Guest.Close) stops here too, before the
// import does anything.
func interrupted(ctx context.Context, mod api.Module) {
	if mod.IsClosed() {
		panic(sys.NewExitError(exitClosed))
	}
	err := ctx.Err()
	if err == nil {
		return
	}
	code := sys.ExitCodeContextCanceled
	if errors.Is(err, context.DeadlineExceeded) {
		code = sys.ExitCodeDeadlineExceeded
	}
	_ = mod.CloseWithExitCode(ctx, code)
	panic(sys.NewExitError(code))
}

// interpose lets Options.Interpose kill the guest at this site: the module
// is closed and the guest unwinds at once (wazero's documented way to exit
// from a host function).
func (g *Guest) interpose(ctx context.Context, mod api.Module, name string, after bool) {
	if g.opts.Interpose == nil {
		return
	}
	if err := g.opts.Interpose(Site{Import: name, After: after, Phase: g.phase}); err != nil {
		g.killed = err
		_ = mod.CloseWithExitCode(ctx, exitKilled)
		panic(sys.NewExitError(exitKilled))
	}
}
