package core

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/tool"
)

// MaxAnswerLen bounds one free-text answer.
const MaxAnswerLen = 16 << 10

// questionV1 is the question@1 adapter: an answered question settles its
// call with the answers as the tool's output; a cancelled one ends the turn.
type questionV1 struct{}

func init() { registerAdapter(questionV1{}) }

func (questionV1) Name() string            { return tool.QuestionAdapter }
func (questionV1) Kind() string            { return event.KindQuestion }
func (questionV1) CancelEvent() event.Type { return event.QuestionCancelled }

func (questionV1) Judge(request json.RawMessage, r Reply) (Verdict, error) {
	switch {
	case r.Decision != "":
		return Verdict{}, invalid(`reply: a question takes answers or cancel, not "reply" (that is a permission's)`)
	case r.Cancel && r.Answers != nil:
		return Verdict{}, invalid("reply: give either answers or cancel, not both")
	case len(r.Message) > MaxReplyMessage:
		return Verdict{}, invalid("reply: message is longer than %d bytes", MaxReplyMessage)
	case r.Cancel:
		return Verdict{State: BlockerCancelled, Event: event.QuestionCancelled, EndTurn: true}, nil
	}
	var req tool.QuestionRequest
	if err := json.Unmarshal(request, &req); err != nil {
		return Verdict{}, fmt.Errorf("read question request: %w", err)
	}
	if err := checkAnswers(req, r.Answers); err != nil {
		return Verdict{}, err
	}
	return Verdict{State: BlockerAnswered, Event: event.QuestionAnswered}, nil
}

// checkAnswers checks one answer list per question: choices offered (one
// unless multiple), or one free-text answer where no choices are offered.
func checkAnswers(req tool.QuestionRequest, answers [][]string) error {
	if len(answers) != len(req.Questions) {
		return invalid("reply: %d answers for %d questions; give one list of answers per question", len(answers), len(req.Questions))
	}
	for i, q := range req.Questions {
		a, n := answers[i], strconv.Itoa(i+1)
		switch {
		case len(a) == 0:
			return invalid("reply: answer %s is empty", n)
		case len(a) > 1 && !q.Multiple:
			return invalid("reply: question %s takes one answer, not %d", n, len(a))
		}
		seen := map[string]bool{}
		for _, s := range a {
			switch {
			case len(q.Choices) > 0 && !slices.Contains(q.Choices, s):
				return invalid("reply: %q is not a choice of question %s", Clip(s), n)
			case strings.TrimSpace(s) == "":
				return invalid("reply: answer %s is empty", n)
			case len(s) > MaxAnswerLen:
				return invalid("reply: answer %s is longer than %d bytes", n, MaxAnswerLen)
			case seen[s]:
				return invalid("reply: answer %s repeats %q", n, Clip(s))
			}
			seen[s] = true
		}
	}
	return nil
}

// Continue renders the answers as the question tool's output.
func (questionV1) Continue(resolved []ResolvedBlocker) Continuation {
	var b strings.Builder
	b.WriteString("The user answered:")
	for _, rb := range resolved {
		var req tool.QuestionRequest
		if err := json.Unmarshal(rb.Request, &req); err != nil {
			return Continuation{Outcome: event.OutcomeError, Output: "The question's record could not be read: " + err.Error()}
		}
		for i, q := range req.Questions {
			var a []string
			if i < len(rb.Reply.Answers) {
				a = rb.Reply.Answers[i]
			}
			quoted := make([]string, len(a))
			for j, s := range a {
				quoted[j] = strconv.Quote(s)
			}
			fmt.Fprintf(&b, "\n%s → %s", strconv.Quote(q.Question), strings.Join(quoted, ", "))
		}
		if rb.Reply.Message != "" {
			fmt.Fprintf(&b, "\nThe user added: %s", rb.Reply.Message)
		}
	}
	return Continuation{Outcome: event.OutcomeOK, Output: b.String()}
}

// UnsettledQuestionOutput is what a later turn's model reads about a
// question call of an ended turn that never got a result: the turn ended
// with the question cancelled, or with it answered but before the
// continuation that would have settled it (a sibling's plain reject, or an
// interrupt, while another blocker of the step was pending). An answered
// question reads as its continuation would have (the answers, and the
// reply's message); a cancelled one says how it ended and passes on the
// message a user sent with the cancel. Without this the model read only
// that the call had no result, and the user's words never reached it.
// state, reason, request and reply are the blocker's as stored (reply is
// empty for an interrupt's cancellation). ok is false when it knows
// nothing better than that the call has no result: a pending question (its
// turn did not end), an adapter this build lacks, a reply it cannot read.
func UnsettledQuestionOutput(adapter, state, reason string, request, reply json.RawMessage) (text string, ok bool) {
	var r Reply
	if len(reply) > 0 {
		if err := json.Unmarshal(reply, &r); err != nil {
			return "", false
		}
	}
	switch {
	case state == BlockerAnswered:
		ad, found := AdapterFor(adapter)
		if !found {
			return "", false
		}
		return ad.Continue([]ResolvedBlocker{{Blocker: Blocker{Adapter: adapter, State: state, Request: request}, Reply: r}}).Output, true
	case state != BlockerCancelled:
		return "", false
	case reason == event.CancelReply:
		out := "The user cancelled this question instead of answering it, which ended the turn."
		if r.Message != "" {
			out += "\nThe user added: " + r.Message
		}
		return out, true
	case reason == event.CancelSibling:
		return "This question was not answered: the user's reply to another request of the same step ended the turn.", true
	default:
		return "This question was not answered: its turn ended (interrupted or replaced) while it waited for the user.", true
	}
}
