package offline

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/revenantrt/revenant/core/model"
)

// answer decides the whole answer to req. It reads nothing but req, which
// is what makes the offline model pure.
func answer(req model.Request, wordDelay time.Duration) ([]step, error) {
	at := promptIndex(req.Messages)
	var d directives
	if at >= 0 {
		d = parse(req.Messages[at].Text)
	}
	if d.failed {
		return nil, &model.Error{Retryable: false, Msg: d.failMsg}
	}
	in := inputTokens(req.Messages)
	if len(d.problems) > 0 {
		return textSteps(strings.Join(d.problems, "\n"), 0, wordDelay, in), nil
	}
	// One /tool directive per step: the tool results after the prompt say
	// how many have been answered.
	var results []model.Message
	for _, m := range req.Messages[at+1:] {
		if m.Role == model.RoleTool {
			results = append(results, m)
		}
	}
	if k := len(results); k < len(d.tools) {
		return toolSteps(k, d.tools[k], in), nil
	}
	return textSteps(reply(d, results), d.sleep, wordDelay, in), nil
}

// promptIndex finds the last user message, skipping the notice added
// before a resumed execution: a resume must answer the same prompt. It
// returns -1 when there is none.
func promptIndex(msgs []model.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == model.RoleUser && !msgs[i].Notice {
			return i
		}
	}
	return -1
}

// reply is the text answer once every /tool directive has been answered.
func reply(d directives, results []model.Message) string {
	var lines []string
	if len(d.tools) > 0 {
		for i, r := range results {
			name := r.Name
			if name == "" && i < len(d.tools) {
				name = d.tools[i].name
			}
			lines = append(lines, fmt.Sprintf("Tool %s returned: %s", name, r.Text))
		}
	}
	if d.words != "" {
		lines = append(lines, "You said: "+d.words)
	}
	if len(lines) == 0 {
		return "OK."
	}
	return strings.Join(lines, "\n")
}

// textSteps streams text word by word: sleep before the first word,
// wordDelay before each later one.
func textSteps(text string, sleep, wordDelay time.Duration, in int) []step {
	var steps []step
	for i, w := range splitWords(text) {
		wait := wordDelay
		if i == 0 {
			wait = sleep
		}
		steps = append(steps, step{wait: wait, chunk: model.Chunk{Text: w}})
	}
	return finish(steps, model.FinishStop, in)
}

// toolSteps streams the k-th tool call the way providers do: a head with
// id and name, then the arguments in several pieces.
func toolSteps(k int, call toolCall, in int) []step {
	steps := []step{{chunk: model.Chunk{ToolCall: &model.ToolCallDelta{
		Index: 0, ID: fmt.Sprintf("offline-call-%d", k), Name: call.name,
	}}}}
	for _, piece := range splitArgs(call.args) {
		steps = append(steps, step{chunk: model.Chunk{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: piece}}})
	}
	return finish(steps, model.FinishToolCalls, in)
}

// finish ends an answer with the finish reason, then usage, in separate
// chunks as OpenAI-compatible providers send them. Every step so far
// carried text or a tool-call delta, so they are the output tokens.
func finish(steps []step, reason string, in int) []step {
	usage := &model.Usage{InputTokens: in, OutputTokens: len(steps)}
	return append(steps,
		step{chunk: model.Chunk{Finish: reason}},
		step{chunk: model.Chunk{Usage: usage}})
}

// inputTokens counts the words of every message: a stand-in for a
// tokenizer that is deterministic and needs no tables.
func inputTokens(msgs []model.Message) int {
	n := 0
	for _, m := range msgs {
		// len(strings.Fields(m.Text)), without the slice (and the guest
		// without strings.Fields): a word starts at each non-space rune
		// after a space or the start.
		prevSpace := true
		for _, r := range m.Text {
			space := unicode.IsSpace(r)
			if prevSpace && !space {
				n++
			}
			prevSpace = space
		}
	}
	return n
}

// splitWords cuts text into words, each keeping the whitespace after it,
// so the pieces join back to exactly text.
func splitWords(text string) []string {
	var words []string
	start, prevSpace := 0, false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if prevSpace && !space {
			words = append(words, text[start:i])
			start = i
		}
		prevSpace = space
	}
	if start < len(text) {
		words = append(words, text[start:])
	}
	return words
}

// splitArgs cuts JSON text into two or three pieces at rune boundaries (a
// piece ending mid-rune would be mangled when stored as JSON). Tool
// arguments are at least "{}", so there are always two pieces or more,
// which exercises the caller's accumulation of arguments.
func splitArgs(s string) []string {
	size := (utf8.RuneCountInString(s) + 2) / 3
	var pieces []string
	start, n := 0, 0
	for i := range s {
		if n > 0 && n%size == 0 {
			pieces = append(pieces, s[start:i])
			start = i
		}
		n++
	}
	return append(pieces, s[start:])
}
