//go:build wasip1

package main

import "unsafe"

// The revenant imports (docs/abi.md). Pointers are guest addresses; each
// import is synchronous and never blocks the guest on I/O: anything slow
// (egress, timers, the wake-up) is started here and answered by an export.

//go:wasmimport revenant sql_begin
func hostSQLBegin() uint32

//go:wasmimport revenant sql_exec
func hostSQLExec(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport revenant sql_query
func hostSQLQuery(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport revenant sql_commit
func hostSQLCommit() uint32

//go:wasmimport revenant sql_rollback
func hostSQLRollback() uint32

//go:wasmimport revenant result
func hostResult(ptr unsafe.Pointer)

//go:wasmimport revenant clock_now
func hostClockNow() int64

//go:wasmimport revenant timer_set
func hostTimerSet(id uint64, at int64)

//go:wasmimport revenant timer_clear
func hostTimerClear(id uint64)

// hostWakeArm answers 0 once the host stored the wake-up, or the SQLite
// result code of the failure that kept it from storing it (ABI 1.6).
//
//go:wasmimport revenant wake_arm_checked
func hostWakeArm(at int64) int32

//go:wasmimport revenant wake_clear
func hostWakeClear()

//go:wasmimport revenant egress_start
func hostEgressStart(id uint64, ptr unsafe.Pointer, n uint32)

//go:wasmimport revenant egress_cancel
func hostEgressCancel(id uint64)

//go:wasmimport revenant emit
func hostEmit(ptr unsafe.Pointer, n uint32)

//go:wasmimport revenant respond
func hostRespond(id uint64, ptr unsafe.Pointer, n uint32)

//go:wasmimport revenant random
func hostRandom(ptr unsafe.Pointer, n uint32)

//go:wasmimport revenant log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport revenant phase
func hostPhase(p uint32)

//go:wasmimport revenant fail
func hostFail(ptr unsafe.Pointer, n uint32)

// bytesPtr returns the address and length of b for an import. The caller
// keeps b alive across the call (it is an argument, so it is).
func bytesPtr(b []byte) (unsafe.Pointer, uint32) {
	if len(b) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b))
}
