package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/revenantrt/revenant/core/event"
)

// The scripted model: a share of the trees (Config.Scripted) runs the
// guest's OpenAI-compatible provider instead of the offline model, and the
// simulator, which answers every egress, answers its requests too. The
// offline model asks for one tool call per step; the scripted one reads
// the same directives (/tool, /ask, /task) but a directive line that
// starts with "+" joins the step of the line before, so one step asks for
// several calls: a foreground task beside a question, two webhook calls, a
// call that asks for permission beside a question, two children at once.
// A step's calls run, park and settle together, so the rules of a step
// with several blockers (a park whose sibling task already ended, a task
// result while a sibling question is pending) are exercised.
//
// Like the offline model, it is a pure function of the request: the last
// user message (not the continuation notice) is the prompt; the assistant
// messages with tool calls after it count the steps answered; once every
// step was asked for, the answer is text: one line per tool result, then
// the prompt's words. Other lines (words, /sleep) are words.

// scriptedBase is the scripted model's base URL: the simulator answers it,
// nothing is ever sent there.
const scriptedBase = "https://model.sim.invalid/v1"

type scriptCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// scriptedAnswer is the scripted model's answer to a chat completions
// request body: a complete JSON completion (the provider reads a JSON
// answer as a finished stream), or, for a text answer to a prompt with a
// floodLine, a stream of floodEvents server-sent events (streamed).
func scriptedAnswer(body []byte) (answer []byte, streamed bool, err error) {
	var req struct {
		Messages []struct {
			Role      string       `json:"role"`
			Content   *string      `json:"content"`
			ToolCalls []scriptCall `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, false, fmt.Errorf("scripted model: decode request: %w", err)
	}
	prompt := -1
	for i, m := range req.Messages {
		if m.Role == "user" && m.Content != nil && *m.Content != event.ContinuationNotice {
			prompt = i
		}
	}
	var steps [][]scriptCall
	var words []string
	done := 0
	var results []string
	flood := false
	if prompt >= 0 {
		steps, words = script(*req.Messages[prompt].Content)
		if i := slices.Index(words, floodLine); i >= 0 {
			flood, words = true, slices.Delete(words, i, i+1)
		}
		for _, m := range req.Messages[prompt+1:] {
			switch {
			case m.Role == "assistant" && len(m.ToolCalls) > 0:
				done++
			case m.Role == "tool" && m.Content != nil:
				results = append(results, *m.Content)
			}
		}
	}
	msg := map[string]any{"role": "assistant"}
	finish := "stop"
	if done < len(steps) {
		calls := steps[done]
		for i := range calls {
			calls[i].Index, calls[i].ID, calls[i].Type = i, fmt.Sprintf("scripted-%d-%d", done, i), "function"
		}
		msg["content"], msg["tool_calls"], finish = nil, calls, "tool_calls"
	} else {
		var lines []string
		for _, r := range results {
			lines = append(lines, "Tool returned: "+r)
		}
		if len(words) > 0 {
			lines = append(lines, "You said: "+strings.Join(words, " "))
		}
		if len(lines) == 0 {
			lines = append(lines, "OK.")
		}
		msg["content"] = strings.Join(lines, "\n")
		if flood {
			return floodAnswer(strings.Join(lines, "\n")), true, nil
		}
	}
	answer, err = json.Marshal(map[string]any{
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": len(body) / 4, "completion_tokens": 1 + done},
	})
	return answer, false, err
}

// floodLine in a prompt makes the scripted model stream its text answer
// in floodEvents server-sent events, each with text, which the simulator
// delivers in one chunk (answer): the guest publishes a live delta for
// each within one call, more than a watch's subscription holds (1024,
// wasm/guest watch), so the subscription falls behind and its watch
// subscribes again (Config.Flood; check.RuleDeltas).
const (
	floodLine   = "/flood"
	floodEvents = 1100
)

// floodAnswer is text streamed in floodEvents events: the text, then
// dots, then the finish reason and [DONE].
func floodAnswer(text string) []byte {
	var b strings.Builder
	event := func(v any) {
		j, _ := json.Marshal(v)
		b.WriteString("data: ")
		b.Write(j)
		b.WriteString("\n\n")
	}
	delta := func(content string) {
		event(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": content}}}})
	}
	delta(text)
	for range floodEvents - 1 {
		delta(" .")
	}
	event(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// script reads a prompt: its steps of calls, and its words.
func script(prompt string) ([][]scriptCall, []string) {
	var steps [][]scriptCall
	var words []string
	for _, line := range strings.Split(prompt, "\n") {
		line = strings.TrimSpace(line)
		join := strings.HasPrefix(line, "+/")
		if join {
			line = line[1:]
		}
		name, args, ok := directive(line)
		if !ok {
			if line != "" {
				words = append(words, line)
			}
			continue
		}
		var c scriptCall
		c.Function.Name, c.Function.Arguments = name, args
		if join && len(steps) > 0 {
			steps[len(steps)-1] = append(steps[len(steps)-1], c)
		} else {
			steps = append(steps, []scriptCall{c})
		}
	}
	return steps, words
}

// directive reads a call directive line: /tool NAME {json}, /ask QUESTION
// or /task [--background] PROMPT.
func directive(line string) (name, args string, ok bool) {
	word, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch word {
	case "/tool":
		name, args, _ = strings.Cut(rest, " ")
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		return name, strings.TrimSpace(args), name != ""
	case "/ask":
		b, _ := json.Marshal(map[string]any{"questions": []map[string]string{{"question": rest}}})
		return "question", string(b), rest != ""
	case "/task":
		bg := strings.HasPrefix(rest, "--background ")
		if bg {
			rest = strings.TrimSpace(strings.TrimPrefix(rest, "--background "))
		}
		b, _ := json.Marshal(map[string]any{"prompt": rest, "background": bg})
		return "task", string(b), rest != ""
	}
	return "", "", false
}

// multiStep is a prompt of a tree that runs the scripted model: most ask
// for a step of several calls (the first call's line, then "+" lines),
// the rest are the ordinary workload's, which the scripted model reads the
// same way (one call per step).
//
//   - a foreground child that answers at once, beside a question: the
//     child's end resolves its task blocker while the question is pending,
//     which must not continue the parent (nor take its claim);
//   - a foreground child that sleeps beside a question: a reply that
//     cancels the question ends the turn and must stop the child before
//     it answers;
//   - a foreground child that asks, beside a question: two waits in one
//     step, answered in either order;
//   - a question beside a foreground child (the other order);
//   - two webhook calls, one idempotent;
//   - a call that asks for permission beside a question;
//   - two foreground children;
//   - a background child beside a question;
//   - a foreground child beside a webhook call, with or without a
//     question too: the child may end before the webhook answers, so
//     before the step parks, whose park must then resolve the ended
//     task at once (with the question pending, without continuing).
func (w *workload) multiStep(a *action, n int) []string {
	tool := func(name string, i int) string {
		args, _ := json.Marshal(map[string]any{"n": n, "line": i, "multi": true})
		return fmt.Sprintf("/tool %s %s", name, args)
	}
	ask := func(i int) string { return fmt.Sprintf("/ask question %d.%d: which colour, sibling?", n, i) }
	say := words(w.rng, n)
	childAsk := fmt.Sprintf("/ask question %d.9: which colour, child?", n)
	a.tasks = true
	switch w.rng.IntN(10) {
	case 0:
		a.ask = true
		return []string{"/task " + say, "+" + ask(1)}
	case 1:
		a.ask = true
		return []string{fmt.Sprintf("/task /sleep %ds", 2+w.rng.IntN(7)), "+" + ask(1)}
	case 2:
		a.ask = true
		return []string{"/task " + childAsk, "+" + ask(1)}
	case 3:
		a.ask = true
		return []string{ask(1), "+/task " + say}
	case 4:
		a.tasks = false
		return []string{tool(toolIHook, 0), "+" + tool(toolHook, 1)}
	case 5:
		a.ask, a.perms, a.tasks = true, true, false
		return []string{tool(toolAHook, 0), "+" + ask(1)}
	case 6:
		return []string{"/task " + say, "+/task " + tool(toolIHook, 0)}
	case 7:
		return []string{"/task " + say, "+" + tool(toolIHook, 0)}
	case 8:
		a.ask = true
		return []string{"/task " + say, "+" + tool(toolIHook, 0), "+" + ask(1)}
	}
	a.ask = true
	return []string{"/task --background " + say, "+" + ask(1)}
}

// scriptedFor draws whether tree i runs the scripted model, on a
// generator of its own, so it changes nothing else the tree draws.
func (c Config) scriptedFor(i int) bool {
	if c.Scripted == 0 {
		return false
	}
	return stream(c.Seed, keyScripted, i).Float64() < c.Scripted
}

// floodAsked draws whether the prompt being sent (to the root or a
// child, once: resends reuse its request) asks for a flooded answer
// (Config.Flood).
func (t *tree) floodAsked() bool {
	return t.flood != nil && t.flood.Float64() < t.floodShare
}

// noteFlood runs once the guest call that delivered r's body returned:
// a flooded answer whose call emitted fewer live deltas than its events
// had its watch's subscription fall behind (wasm/guest watch), which
// check.RuleDeltas must hold past all the same.
func (t *tree) noteFlood(r *reply) {
	if r.flood == 0 {
		return
	}
	t.floods++
	if t.callDeltas < r.flood {
		t.fellBehind++
	}
}
