package treetest

import (
	"context"
	"strings"
	"sync"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
)

// Driver is a scripted stand-in for the turn runner. What a turn does is
// read from its prompt text:
//
//	hold      wait until the execution is cancelled or Release is called,
//	          then answer
//	stubborn  like hold, but ignore cancellation (a tool body that does)
//	fail      end the turn failed{type:"driver"}
//	progress  record a progress event, then hold
//	anything  answer at once with an assistant message
//
// Every Run is announced on Started before it does anything.
type Driver struct {
	Started chan *core.Execution

	mu      sync.Mutex
	release chan struct{}
	runs    int
}

// NewDriver returns a driver whose Started channel buffers n runs.
func NewDriver(n int) *Driver {
	return &Driver{Started: make(chan *core.Execution, n), release: make(chan struct{})}
}

// Release lets every held execution (present and future) answer.
func (d *Driver) Release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.release:
	default:
		close(d.release)
	}
}

// Runs is how many executions this driver ran.
func (d *Driver) Runs() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runs
}

// Run implements core.Driver.
func (d *Driver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.mu.Lock()
	d.runs++
	release := d.release
	d.mu.Unlock()
	d.Started <- x
	text := x.Prompt()
	switch {
	case strings.HasPrefix(text, "fail"):
		return core.Outcome{Kind: core.Failed, FailType: event.FailDriver, Message: "scripted failure"}
	case strings.HasPrefix(text, "progress"):
		if _, err := x.Append(ctx, true, core.NewEvent{Type: event.Progress, Payload: event.ProgressMade{ExecutionID: x.ID(), What: "scripted"}}); err != nil {
			return core.Outcome{Kind: core.Stopped}
		}
		fallthrough
	case strings.HasPrefix(text, "hold"):
		select {
		case <-release:
		case <-ctx.Done():
			return core.Outcome{Kind: core.Stopped}
		}
	case strings.HasPrefix(text, "stubborn"):
		<-release
	}
	return Answer(ctx, x)
}

// Answer appends the assistant's echo of the prompt and reports success, or
// Stopped if the write was refused.
func Answer(ctx context.Context, x *core.Execution) core.Outcome {
	_, err := x.Append(ctx, true, core.NewEvent{Type: event.MessageAdded, Payload: event.Message{
		MessageID: x.ID() + ".answer", PromptID: x.PromptID(), Role: event.RoleAssistant, Text: "echo: " + x.Prompt()}})
	if err != nil {
		return core.Outcome{Kind: core.Stopped}
	}
	return core.Outcome{Kind: core.Succeeded}
}
