package abi

// ImportModule is the module name of every revenant import.
const ImportModule = "revenant"

// Exports of the guest. Integer parameters are i32 unless noted; ids are
// i64; (ptr, len) name a byte range in guest memory that the host got from
// ExportAlloc and filled, and that the export frees.
const (
	ExportVersion        = "revenant_abi_version"     // () -> i32 packed version
	ExportAlloc          = "revenant_alloc"           // (size) -> ptr
	ExportFree           = "revenant_free"            // (ptr)
	ExportBoot           = "revenant_boot"            // (ptr, len BootConfig) -> status
	ExportRequest        = "revenant_request"         // (id i64, ptr, len Request) -> status
	ExportCancelRequest  = "revenant_cancel_request"  // (id i64) -> status
	ExportWake           = "revenant_wake"            // () -> status
	ExportTimer          = "revenant_timer"           // (id i64) -> status
	ExportEgressResponse = "revenant_egress_response" // (id i64, ptr, len EgressResponse) -> status
	ExportEgressChunk    = "revenant_egress_chunk"    // (id i64, ptr, len bytes) -> status
	ExportEgressEnd      = "revenant_egress_end"      // (id i64, ptr, len EgressEnd; empty: EOF) -> status
	ExportPump           = "revenant_pump"            // () -> status
	ExportShutdown       = "revenant_shutdown"        // () -> status

	// Since 1.1; a host checks the guest has them before use.
	ExportIdle    = "revenant_idle"     // () -> IsIdle, NotIdle or StatusNotBooted; runs no goroutine
	ExportDiagSQL = "revenant_diag_sql" // (n) -> status: diagnostic, n "SELECT 1" through the SQL imports
)

// Imports of the guest, in module ImportModule.
const (
	ImportSQLBegin     = "sql_begin"     // () -> i32 result length (0: ok)
	ImportSQLExec      = "sql_exec"      // (ptr, len Statement) -> i32 result length
	ImportSQLQuery     = "sql_query"     // (ptr, len Statement) -> i32 result length
	ImportSQLCommit    = "sql_commit"    // () -> i32 result length (0: ok)
	ImportSQLRollback  = "sql_rollback"  // () -> i32 result length (0: ok)
	ImportResult       = "result"        // (ptr) copies the pending result
	ImportClockNow     = "clock_now"     // () -> i64 ms
	ImportTimerSet     = "timer_set"     // (id i64, at i64 ms)
	ImportTimerClear   = "timer_clear"   // (id i64)
	ImportWakeArm      = "wake_arm"      // (at i64 ms); a failure to store it traps the guest
	ImportWakeClear    = "wake_clear"    // ()
	ImportEgressStart  = "egress_start"  // (id i64, ptr, len EgressRequest)
	ImportEgressCancel = "egress_cancel" // (id i64)
	ImportEmit         = "emit"          // (ptr, len Emitted)
	ImportRespond      = "respond"       // (id i64, ptr, len ResponsePart)
	ImportRandom       = "random"        // (ptr, len) fill with random bytes
	ImportLog          = "log"           // (level i32 slog.Level, ptr, len text)
	ImportPhase        = "phase"         // (phase i32)
	ImportFail         = "fail"          // (ptr, len) the failing export's message

	// Since 1.6 (MinorWakeArmChecked).
	ImportWakeArmChecked = "wake_arm_checked" // (at i64 ms) -> i32 0 stored, else an SQLite result code
)
