package check

import (
	"strings"

	"github.com/revenantrt/revenant/core/event"
)

// A streaming step's text checkpoints (DESIGN §5) each carry the text
// streamed since the one before, at the offset where it follows it; a cut
// step keeps its last checkpoint (§7). A step cut after its execution died
// (reason interrupted: a later execution or an interrupt found it open)
// carries exactly the text its checkpoints kept; one its execution cut
// itself (stopped, or a model failure) may keep everything it received,
// which begins with that text, and so does a step recorded complete. A cut
// that drops what was checkpointed loses the answer a kill was promised to
// spare.

// checkpoint adds a checkpoint to its step's kept text.
func (ck *checker) checkpoint(sid string, e *rec, tr *turn) {
	kept := tr.checkpointed[e.p.StepID]
	if e.p.Offset != len(kept) {
		ck.fail(sid, e, RuleCutKeeps, "a checkpoint of step %s at offset %d, but its checkpoints so far kept %d bytes", e.p.StepID, e.p.Offset, len(kept))
	}
	tr.checkpointed[e.p.StepID] = kept + e.p.Text
}

// keepsCheckpoint judges a step's cut or completion against its
// checkpoints.
func (ck *checker) keepsCheckpoint(sid string, e *rec, tr *turn) {
	kept := tr.checkpointed[e.p.StepID]
	switch {
	case e.Type == event.StepCut && e.p.Reason == event.CutInterrupted && e.p.Text != kept:
		ck.fail(sid, e, RuleCutKeeps, "step %s is cut after its execution died keeping %d bytes (%.40q), but its checkpoints kept %d (%.40q)",
			e.p.StepID, len(e.p.Text), e.p.Text, len(kept), kept)
	case e.Type == event.StepCut && !strings.HasPrefix(e.p.Text, kept):
		ck.fail(sid, e, RuleCutKeeps, "step %s is cut (%s) keeping %d bytes (%.40q) that do not begin with the %d its checkpoints kept (%.40q)",
			e.p.StepID, e.p.Reason, len(e.p.Text), e.p.Text, len(kept), kept)
	case e.Type == event.StepCompleted && !strings.HasPrefix(e.p.Text, kept):
		ck.fail(sid, e, RuleCutKeeps, "step %s is recorded complete with text %.40q that does not begin with its checkpointed %.40q",
			e.p.StepID, e.p.Text, kept)
	}
}
