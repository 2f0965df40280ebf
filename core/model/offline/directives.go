package offline

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// toolCall is one /tool directive.
type toolCall struct {
	name string
	args string // a JSON object, as written
}

// directives is what a prompt asks of the offline model.
type directives struct {
	words    string // the prompt without its directive lines
	tools    []toolCall
	sleep    time.Duration
	failed   bool
	failMsg  string
	problems []string // one sentence per directive that cannot be followed
}

// parse reads a prompt line by line. A line is a directive when, trimmed,
// it starts with a known /name followed by a space or its end; any other
// line (a path like /usr/bin, an unknown /command) is words.
func parse(prompt string) directives {
	var d directives
	var words []string
	for _, line := range strings.Split(prompt, "\n") {
		name, arg, ok := directive(line)
		if !ok {
			words = append(words, line)
			continue
		}
		switch name {
		case "tool":
			d.addTool(arg)
		case "sleep":
			d.addSleep(arg)
		case "fail":
			if !d.failed {
				d.failed = true
				d.failMsg = arg
				if d.failMsg == "" {
					d.failMsg = "failure requested by /fail"
				}
			}
		case "ask":
			d.addAsk(arg)
		case "task":
			d.addTask(arg)
		}
	}
	d.words = strings.TrimSpace(strings.Join(words, "\n"))
	return d
}

// directive splits a directive line into its name and argument.
func directive(line string) (name, arg string, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(line), "/")
	if !found {
		return "", "", false
	}
	name, arg = rest, ""
	if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
		name, arg = rest[:i], strings.TrimSpace(rest[i:])
	}
	switch name {
	case "tool", "ask", "task", "sleep", "fail":
		return name, arg, true
	}
	return "", "", false
}

// addTool reads "NAME {json}". Arguments must be a JSON object because
// that is what tool calls carry; missing arguments mean "{}".
func (d *directives) addTool(arg string) {
	name, args := arg, ""
	if i := strings.IndexFunc(arg, unicode.IsSpace); i >= 0 {
		name, args = arg[:i], strings.TrimSpace(arg[i:])
	}
	if name == "" {
		d.problems = append(d.problems, "The /tool directive needs a tool name: /tool NAME {json}.")
		return
	}
	if args == "" {
		args = "{}"
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		d.problems = append(d.problems, fmt.Sprintf(
			"The /tool %s directive needs its arguments as a JSON object, not %s.", name, args))
		return
	}
	d.tools = append(d.tools, toolCall{name: name, args: args})
}

// addAsk queues a call of the question tool asking arg, in order with the
// /tool directives: "/ask Which colour?" is
// "/tool question {"questions":[{"question":"Which colour?"}]}".
func (d *directives) addAsk(arg string) {
	if arg == "" {
		d.problems = append(d.problems, "The /ask directive needs a question: /ask QUESTION.")
		return
	}
	args, err := json.Marshal(map[string]any{"questions": []map[string]string{{"question": arg}}})
	if err != nil {
		d.problems = append(d.problems, fmt.Sprintf("The /ask directive could not encode %q.", arg))
		return
	}
	d.tools = append(d.tools, toolCall{name: "question", args: string(args)})
}

// BackgroundFlag before a /task prompt asks for a background sub-agent.
const BackgroundFlag = "--background"

// addTask reads "[--background] PROMPT" into a call of the task tool,
// queued with the /tool calls in prompt order.
func (d *directives) addTask(arg string) {
	background := false
	if rest, ok := strings.CutPrefix(arg, BackgroundFlag); ok && (rest == "" || unicode.IsSpace(rune(rest[0]))) {
		background, arg = true, strings.TrimSpace(rest)
	}
	if arg == "" {
		d.problems = append(d.problems, "The /task directive needs a prompt: /task [--background] PROMPT.")
		return
	}
	args, err := json.Marshal(map[string]any{"prompt": arg, "background": background})
	if err != nil {
		d.problems = append(d.problems, fmt.Sprintf("The /task directive cannot encode its prompt: %v.", err))
		return
	}
	d.tools = append(d.tools, toolCall{name: "task", args: string(args)})
}

// addSleep reads a Go duration. Pauses add up, capped at MaxSleep.
func (d *directives) addSleep(arg string) {
	dur, err := time.ParseDuration(arg)
	if err != nil || dur < 0 {
		d.problems = append(d.problems, fmt.Sprintf(
			"The /sleep directive needs a duration such as 5s or 250ms, not %q.", arg))
		return
	}
	// Cap before adding so the sum cannot overflow.
	d.sleep = min(d.sleep+min(dur, MaxSleep), MaxSleep)
}
