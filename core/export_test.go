package core

import "context"

// SetFinishingHook makes f run in every execution's finish on inst after
// it read how the execution ended and before it takes the claim lock; the
// returned func removes it.
func SetFinishingHook(inst *Instance, f func(*Execution)) (remove func()) {
	return inst.setHook(func(h *testHooks) *execHook { return &h.finishing }, f)
}

// SetInterruptAskedHook makes f run whenever an interrupt request on inst
// has noted itself on the execution it tells to stop; the returned func
// removes it.
func SetInterruptAskedHook(inst *Instance, f func(*Execution)) (remove func()) {
	return inst.setHook(func(h *testHooks) *execHook { return &h.interruptAsked }, f)
}

// setHook makes f inst's test hook that which picks, and returns the func
// that removes it.
func (inst *Instance) setHook(which func(*testHooks) *execHook, f func(*Execution)) (remove func()) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	*which(&inst.hooks) = f
	return func() {
		inst.mu.Lock()
		defer inst.mu.Unlock()
		*which(&inst.hooks) = nil
	}
}

// Cancelled is closed once x's context is cancelled (an interrupt, a
// shutdown).
func (x *Execution) Cancelled() <-chan struct{} { return x.ctx.Done() }

// StartForTest starts the session's claimed turn as a reply's caller does
// once its transaction took the claim (startLocked, under the claim lock).
func (inst *Instance) StartForTest(ctx context.Context, sessionID, cause string) {
	inst.claimMu.Lock()
	defer inst.claimMu.Unlock()
	inst.startLocked(ctx, sessionID, cause)
}

// CancelAll is the cutoff of an interrupt that cancels every queued prompt.
const CancelAll = wholeQueue

// TranscriptQueries are the snapshot's transcript queries by name, with
// their parameters ?1 session id, ?2 before, ?3 from, ?4 the streaming
// step's state, ?5 how many rows.
var TranscriptQueries = map[string]string{"transcript": transcript, "transcriptSizes": transcriptSizes, "page": pageQuery, "pageSizes": pageSizesQuery}

// StepStreaming is the state of a step whose answer is still streaming.
const StepStreaming = StepStarted

// SetInterruptStoppedHook makes f run whenever an interrupt request on
// inst has seen an execution it told to stop end, before it reads what
// that end left to stop; the returned func removes it.
func SetInterruptStoppedHook(inst *Instance, f func(stopped *Execution)) (remove func()) {
	return inst.setHook(func(h *testHooks) *execHook { return &h.interruptStopped }, f)
}
