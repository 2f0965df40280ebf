package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Tools the simulated trees are configured with. Both are webhooks whose
// HTTP side the host performs; the simulator's Services is their receiver
// and keeps the ledger. hook does not deduplicate, so a call must reach it
// at most once; ihook deduplicates by Idempotency-Key, so the guest may
// send a call again after a crash.
const (
	toolHook  = "hook"
	toolIHook = "ihook"
	// toolAHook is hook's twin that asks for permission before each call
	// (its configured default is ask): its calls park until a client
	// approves or rejects them (questions.go).
	toolAHook = "ahook"
)

var ledgerTools = map[string]bool{toolHook: false, toolIHook: true, toolAHook: false}

// actionKind is what a client does.
type actionKind int

const (
	actCreate actionKind = iota
	actPrompt
	actInterrupt
	actList   // GET the pending questions
	actReply  // POST a reply to a question
	actDelete // DELETE the tree (delete.go)
)

// action is one client request, due at a virtual time.
type action struct {
	at       int64
	kind     actionKind
	text     string
	mode     string // "" or "replace"
	clientID string
	session  string     // the session whose path it goes to ("": the root's); a child's for some lists, replies and interrupts
	tries    int        // earlier attempts answered 5xx
	ask      bool       // a prompt whose turn asks a question
	perms    bool       // a prompt whose call asks for permission; a list of permission requests
	reply    *replySpec // actReply
	tasks    bool       // a prompt that starts sub-agents (tasking)
	// A prompt a client sends straight to a child (childPrompt): child is
	// the state of the child it prefers, picked when it is first sent
	// (session is empty until then); waits counts the times it waited
	// for such a child; follow, if set, is an interrupt that follows it
	// that many ms after it is first sent, of the child's parent, or of
	// the child itself with followChild.
	child       childPick
	waits       int
	follow      int64
	followChild bool
	// echo marks an interrupt sent again by an impatient client (echoes).
	echo bool
	// reserved marks a prompt to a child sent under a client id the API
	// reserves for sub-agents' notices (notice-<root>.…): it must be
	// refused with 400, since a prompt holding a notice's id would wedge
	// the child whose end admits that notice.
	reserved bool
}

// childPick is the state of the child a client's prompt to a child
// prefers: one running its task turn, one parked (on its question, a
// permission request, or its own child), or any.
type childPick int

const (
	pickNone childPick = iota
	pickTask
	pickParked
	pickAny
)

// workload builds a session's client actions from its generator. Prompts
// are written in the offline model's directives (docs/offline-model.md):
// tool calls against the ledger tools, /sleep for turns that span virtual
// time, /fail for model failures, /ask for questions that park the turn
// until a client replies (questions.go), /task for sub-agents in the
// foreground and the background (tasking), plain words; some replace the
// running turn, some queue behind it, and interrupts land in between.
type workload struct {
	rng     *rand.Rand
	prompts int  // minted so far, for client ids and tool arguments
	multi   bool // the tree runs the scripted model: half its prompts ask for several calls in a step (multiStep)
}

func (w *workload) batch(from int64, n int) []action {
	var out []action
	at := from
	for range n {
		at += w.gap()
		a := w.prompt(at)
		out = append(out, a)
		// Now and then a client sends the children of a prompt that
		// starts sub-agents a prompt of its own (childPrompt).
		if a.tasks && w.rng.IntN(2) == 0 {
			c := w.childPrompt(at + 200 + int64(w.rng.IntN(3_000)))
			out = append(out, c)
			if c.ask {
				for _, after := range []int64{1_000, 3_000, 7_000, 15_000, 31_000} {
					out = append(out, action{at: c.at + after + int64(w.rng.IntN(1_000)), kind: actList})
				}
			}
		}
		// The client of a prompt that asks polls for its question, less
		// and less often (and lists again after boots and when the tree
		// goes quiet): the prompt may wait in the queue for a while first.
		if a.ask {
			for _, after := range []int64{1_000, 3_000, 7_000, 15_000, 31_000} {
				out = append(out, action{at: at + after + int64(w.rng.IntN(1_000)), kind: actList, perms: a.perms})
			}
		}
		// Interrupts land mostly within the first seconds of a turn, while
		// its model streams or its tool request is out.
		if w.rng.IntN(5) == 0 {
			out = append(out, action{at: at + int64(w.rng.IntN(4_000)), kind: actInterrupt})
		}
	}
	// Interrupts may land after a later prompt: order by time, stably so
	// equal times keep their generation order.
	sortActions(out)
	return out
}

// gap is the pause before the next prompt: often none (it queues behind
// the running turn), sometimes long enough for the tree to go idle.
func (w *workload) gap() int64 {
	switch w.rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return int64(w.rng.IntN(2_000))
	default:
		return int64(w.rng.IntN(30_000))
	}
}

func (w *workload) prompt(at int64) action {
	w.prompts++
	n := w.prompts
	a := action{at: at, kind: actPrompt, clientID: fmt.Sprintf("c%d", n)}
	var lines []string
	tool := func(name string) {
		args, _ := json.Marshal(map[string]any{"n": n, "line": len(lines)})
		lines = append(lines, fmt.Sprintf("/tool %s %s", name, args))
	}
	switch r := w.rng.IntN(35); {
	case w.multi && r%2 == 0:
		lines = append(lines, w.multiStep(&a, n)...)
	case r < 4 && n%2 == 0:
		tool(toolAHook)
		a.ask, a.perms = true, true
	case r < 4:
		tool(toolHook)
	case r < 8:
		tool(toolIHook)
	case r < 11 && n%2 == 0: // a call that runs, then one that asks first
		tool(toolIHook)
		tool(toolAHook)
		a.ask, a.perms = true, true
	case r < 11:
		tool(toolIHook)
		tool(toolHook)
	case r < 13:
		tool(toolHook)
		lines = append(lines, fmt.Sprintf("/sleep %ds", 1+w.rng.IntN(8)))
	case r < 15:
		lines = append(lines, fmt.Sprintf("/sleep %ds", 1+w.rng.IntN(20)))
	case r < 16:
		lines = append(lines, "/fail simulated provider outage")
	case r < 17:
		kv, _ := json.Marshal(map[string]string{"key": fmt.Sprintf("k%d", w.rng.IntN(4)), "value": fmt.Sprint(n)})
		lines = append(lines, "/tool kv_put "+string(kv))
	case r < 19:
	case r < 20:
		// A long answer: it streams for seconds (40 ms a word), so text
		// checkpoints are written while it does and a kill or an
		// interrupt mid-stream cuts a step that kept some
		// (check.RuleCutKeeps).
		lines = append(lines, longWords(w.rng, n))
	case r < 25:
		a.ask = true
		lines = append(lines, w.asking(n, r-20)...)
	default:
		a.tasks = true
		lines = append(lines, w.tasking(&a, n, r-25)...)
	}
	lines = append(lines, words(w.rng, n))
	a.text = strings.Join(lines, "\n")
	if w.rng.IntN(10) == 0 {
		a.mode = "replace"
	}
	return a
}

// plain is a prompt of words alone, queued, to session (a child's path, or
// "" for the root), its words drawn from rng: the workload's generator
// draws the rest of the campaign as it did (the prompts after it are
// numbered one further).
func (w *workload) plain(at int64, session string, rng *rand.Rand) action {
	w.prompts++
	return action{at: at, kind: actPrompt, clientID: fmt.Sprintf("c%d", w.prompts), session: session, text: words(rng, w.prompts)}
}

// asking is the directives of a prompt that asks: a question alone, one
// call of the question tool asking two questions with choices, a question
// after a tool call in the step before, two questions one after the other
// (the second asked by the continuation of the first), or a question whose
// continuation sleeps (a kill can land in it).
func (w *workload) asking(n, kind int) []string {
	q := func(i int) string { return fmt.Sprintf("/ask question %d.%d: which colour?", n, i) }
	switch kind {
	case 0:
		return []string{q(1)}
	case 1:
		args, _ := json.Marshal(map[string]any{"questions": []map[string]any{
			{"question": fmt.Sprintf("question %d.1: which size?", n), "choices": []string{"small", "large"}},
			{"question": fmt.Sprintf("question %d.2: which toppings?", n), "choices": []string{"basil", "olives", "capers"}, "multiple": true},
		}})
		return []string{"/tool question " + string(args)}
	case 2:
		args, _ := json.Marshal(map[string]any{"n": n, "line": 0})
		return []string{fmt.Sprintf("/tool %s %s", toolIHook, args), q(1)}
	case 3:
		return []string{q(1), q(2)}
	}
	return []string{q(1), fmt.Sprintf("/sleep %ds", 1+w.rng.IntN(5))}
}

// tasking is the directives of a prompt that starts sub-agents (DESIGN
// §10; docs/offline-model.md, /task): a foreground child that echoes, one
// that calls a ledger tool, a background child that calls the
// non-idempotent one, a background child that sleeps (its notice comes
// while later turns run, or during a kill), a foreground child that starts
// a foreground child of its own (depth 2) or a background one (whose
// notice goes to the child), and two children in one turn (a background
// one, then a foreground one that sleeps).
//
// And children that ask (DESIGN §9–§10), which a's client then polls for
// (the root's lists are tree-wide): a foreground child whose question
// parks it while its parent's turn waits on it, a background child that
// asks after its parent's turn went on, a child whose call of ahook asks
// for permission (in the foreground or the background), and a foreground
// child whose own foreground child asks (a chain of two waits). A child's
// prompt is the rest of its line, so it holds one directive at most.
func (w *workload) tasking(a *action, n, kind int) []string {
	tool := func(name string, line int) string {
		args, _ := json.Marshal(map[string]any{"n": n, "line": line, "child": true})
		return fmt.Sprintf("/tool %s %s", name, args)
	}
	say := words(w.rng, n)
	ask := fmt.Sprintf("/ask question %d.1: which colour, child?", n)
	switch kind {
	case 0:
		return []string{"/task " + say}
	case 1:
		return []string{"/task " + tool(toolIHook, 0)}
	case 2:
		return []string{"/task --background " + tool(toolHook, 0)}
	case 3:
		return []string{fmt.Sprintf("/task --background /sleep %ds", 1+w.rng.IntN(10))}
	case 4:
		if n%2 == 0 {
			return []string{"/task /task " + say}
		}
		// The child's own background child: its notice comes to the
		// child, often after the child's task turn (and job) ended.
		return []string{"/task /task --background " + tool(toolHook, 0)}
	case 5:
		return []string{"/task --background " + say, fmt.Sprintf("/task /sleep %ds", 1+w.rng.IntN(5))}
	case 6:
		a.ask = true
		return []string{"/task " + ask}
	case 7:
		a.ask = true
		return []string{"/task --background " + ask}
	case 8:
		a.ask, a.perms = true, true
		if n%2 == 0 {
			return []string{"/task " + tool(toolAHook, 0)}
		}
		return []string{"/task --background " + tool(toolAHook, 0)}
	}
	a.ask = true
	return []string{"/task /task " + ask}
}

// childPrompt is a prompt a client sends straight to a child of the tree
// (POST /v1/sessions/{root}.{n}/prompt), a moment after a prompt that
// starts sub-agents: to a child running its task turn, a parked one, or
// any (the child is picked when the prompt is sent: tree.pickChild). It
// is the child's own (docs/api.md, Sub-agents): it queues behind a task
// turn still running or parked and then runs a turn of its own: words, a
// sleep (a kill or an interrupt lands in it), a ledger tool, or a
// question of its own. Often its parent is interrupted a moment later,
// which must end only the task turn; sometimes the child itself is, which
// may end it (check.RuleChildOwnPrompt).
func (w *workload) childPrompt(at int64) action {
	w.prompts++
	n := w.prompts
	a := action{at: at, kind: actPrompt, clientID: fmt.Sprintf("c%d", n), child: childPick(1 + w.rng.IntN(3))}
	tool := func(name string) string {
		args, _ := json.Marshal(map[string]any{"n": n, "line": 0, "own": true})
		return fmt.Sprintf("/tool %s %s", name, args)
	}
	var lines []string
	switch w.rng.IntN(6) {
	case 0:
	case 1, 2:
		lines = append(lines, fmt.Sprintf("/sleep %ds", 1+w.rng.IntN(6)))
	case 3:
		lines = append(lines, tool(toolIHook))
	case 4:
		lines = append(lines, tool(toolHook), fmt.Sprintf("/sleep %ds", 1+w.rng.IntN(4)))
	default:
		a.ask = true
		lines = append(lines, fmt.Sprintf("/ask question %d.1: which colour, own?", n))
	}
	a.text = strings.Join(append(lines, words(w.rng, n)), "\n")
	if n%8 == 0 {
		// One in eight first tries the child's own notice id (its
		// parent's queue admits the child's notice under it): refused,
		// it is sent again under its own id (tree.done).
		a.reserved = true
	}
	switch w.rng.IntN(6) {
	case 0, 1, 2:
		a.follow = 100 + int64(w.rng.IntN(3_000))
	case 3:
		a.follow, a.followChild = 100+int64(w.rng.IntN(3_000)), true
	}
	return a
}

// afterAlways is the prompt a client sends after it approved ahook always:
// the same tool again, called by the root, a foreground child or a
// background child. The tree's saved rule covers it (DESIGN §9: later
// calls of the tool on the same resource do not ask), so it must run
// without asking; it is polled for like any prompt that asks, in case it
// does (check.RuleAlways then reports it).
func (w *workload) afterAlways(at int64) action {
	w.prompts++
	n := w.prompts
	a := action{at: at, kind: actPrompt, clientID: fmt.Sprintf("c%d", n), ask: true, perms: true}
	args, _ := json.Marshal(map[string]any{"n": n, "line": 0, "again": true})
	call := fmt.Sprintf("/tool %s %s", toolAHook, args)
	switch w.rng.IntN(3) {
	case 1:
		call = "/task " + call
	case 2:
		call = "/task --background " + call
	}
	a.text = call + "\n" + words(w.rng, n)
	return a
}

var vocabulary = strings.Fields("the quick brown fox jumps over a lazy dog while agents resume turns after every eviction")

// words is a prompt's line of 2 to 11 words.
func words(rng *rand.Rand, n int) string { return wordLine(rng, fmt.Sprintf("prompt %d:", n), 2, 10) }

// longWords is a line of 40 to 160 words.
func longWords(rng *rand.Rand, n int) string {
	return wordLine(rng, fmt.Sprintf("long %d:", n), 40, 120)
}

// wordLine is label and then least+rng.IntN(spread) words of the vocabulary.
func wordLine(rng *rand.Rand, label string, least, spread int) string {
	k := least + rng.IntN(spread)
	ws := make([]string, 0, k+1)
	ws = append(ws, label)
	for range k {
		ws = append(ws, vocabulary[rng.IntN(len(vocabulary))])
	}
	return strings.Join(ws, " ")
}

func sortActions(as []action) {
	// Insertion sort: batches are short, and it is stable.
	for i := 1; i < len(as); i++ {
		for j := i; j > 0 && as[j].at < as[j-1].at; j-- {
			as[j], as[j-1] = as[j-1], as[j]
		}
	}
}
