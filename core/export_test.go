package core

// SetFinishingHook makes f run in every execution's finish after it read
// how the execution ended and before it takes the claim lock; the
// returned func removes it. Set it before the instance runs anything.
func SetFinishingHook(f func(*Execution)) (remove func()) {
	testHookFinishing = f
	return func() { testHookFinishing = nil }
}

// Cancelled is closed once x's context is cancelled (an interrupt, a
// shutdown).
func (x *Execution) Cancelled() <-chan struct{} { return x.ctx.Done() }
