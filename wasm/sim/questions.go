package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// The clients of durable questions (DESIGN §9). A prompt with /ask parks
// its turn on a question; the client finds it by listing the pending
// questions (a while after the prompt, after every boot, and when the tree
// goes quiet) and replies to each new one in one of the ways a real client
// population does: an answer, a cancel, two different answers at once,
// the same response_id twice, a reply racing an interrupt, or not yet (the
// question must then still be listed, and answerable, after more kills).
// Every listing and reply goes in the ledger for package check.

// replyPlan is how the client replies to a question it found listed.
type replyPlan int

const (
	planAnswer replyPlan = iota
	planCancel
	planRace          // two different answers at the same instant
	planRepeat        // the same response_id twice: mostly with the same body, now and then with another
	planRaceInterrupt // a reply and an interrupt at the same instant
	planLater         // not now: at a later listing
)

// abandonShare is the share of the questions listed after the kill budget
// is spent that the client never replies to (1 in abandonShare): they
// wait at quiescence, with their turns, the prompts queued behind them and
// the parents waiting on an asking child, which the checker must find
// visibly waiting and nothing else.
const abandonShare = 4

// plans weighs the plans: mostly answers, so most parked turns continue.
var plans = []replyPlan{planAnswer, planAnswer, planAnswer, planCancel, planRace, planRace,
	planRepeat, planRaceInterrupt, planLater, planLater}

// maxPutOff is how often a client puts a question off before it replies.
const maxPutOff = 2

// maxQuietListings bounds the listings a quiet tree gets, so a question
// left waiting does not keep the tree busy forever.
const maxQuietListings = 20

// replySpec is one reply request: its question, body and place in the
// ledger.
type replySpec struct {
	question   string
	responseID string
	cancel     bool   // a cancel, or a permission's reject
	perm       bool   // a reply to a permission request
	path       string // the session whose path it goes to ("": the root's)
	always     bool   // a permission's always reply: the client then calls the tool again (afterAlways)
	body       []byte
	ledger     int // index in Ledger.Replies
}

// asker is the client side of a tree's questions.
type asker struct {
	rng      *rand.Rand
	asks     int            // prompts with /ask (or a call that asks for permission) sent
	permAsks int            // prompts with a call that asks for permission sent
	putOff   map[string]int // question → times put off
	handled  map[string]bool
	minted   int   // response ids
	quietPos int64 // commit position of the last listing that found nothing new (-1: none)
	quiet    int   // listings made because the tree went quiet
	// abandoned counts the questions the client never replies to.
	abandoned int
	// replyKills are the kills while a reply request ran; commitKills
	// those right after one of its commits (the reply's own, mostly).
	replyKills, commitKills int
	// reserve is the part of the kill budget kept for aimAtReplyCommit
	// (replies come late, after ordinary plans spent the rest); a tree
	// that goes quiet releases it.
	reserve    int
	inReply    bool
	commitPlan *plan
}

func newAsker(seed uint64, index, killBudget int) *asker {
	return &asker{rng: stream(seed, keyAsker, index), putOff: map[string]int{}, handled: map[string]bool{}, quietPos: -1,
		reserve: min(2, killBudget/4)}
}

// mayKill reports whether plan p (nil: a new ordinary plan) may still
// kill: an ordinary one leaves the reserve for replies.
func (t *tree) mayKill(p *plan) bool {
	if p != nil && p == t.ask.commitPlan {
		return t.kills < t.killBudget
	}
	return t.kills < t.killBudget-t.ask.reserve
}

// spentOnReply takes a kill of p out of the reserve if p is a reply's.
func (t *tree) spentOnReply(p *plan) {
	if p == t.ask.commitPlan && t.ask.reserve > 0 {
		t.ask.reserve--
	}
}

// listed is a pending question as GET …/questions shows it.
type listed struct {
	ID string `json:"id"`
	// SessionID is the session that asked: a child's on the root's
	// tree-wide list.
	SessionID string `json:"session_id"`
	Request   struct {
		Questions []struct {
			Choices  []string `json:"choices"`
			Multiple bool     `json:"multiple"`
		} `json:"questions"`
	} `json:"request"`
}

// onListing records a listing answered 200 and plans replies to the
// questions new to the client.
func (t *tree) onListing(r *request) {
	var body struct {
		Questions   []listed `json:"questions"`
		Permissions []listed `json:"permissions"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.failf("%s: 200 with body %q: %v", listRoute(r.a.perms), r.body, err)
		return
	}
	ls := check.Listing{Session: t.pathOf(r.a.session), At: t.now, Sent: r.sent, Answered: t.commitPos(), IDs: []string{}}
	pending := body.Questions
	if r.a.perms {
		ls.Kind, pending = "permission", body.Permissions
	}
	fresh := false
	for _, q := range pending {
		ls.IDs = append(ls.IDs, q.ID)
		if !t.ask.handled[q.ID] {
			fresh = true
			t.planReply(q)
		}
	}
	t.ledger.Listings = append(t.ledger.Listings, ls)
	t.deleteOnListing(len(pending))
	if !fresh && r.a.session == "" {
		t.ask.quietPos = ls.Answered
	}
}

// pathOf is the session a client request's path names: a child's, or the
// tree's root.
func (t *tree) pathOf(session string) string {
	if session == "" {
		return t.id
	}
	return session
}

// planReply schedules the client's reply to a question new to it.
func (t *tree) planReply(q listed) {
	a := t.ask
	if q.SessionID != "" && q.SessionID != t.id && t.planQuietInterrupt(q.SessionID) {
		// The client interrupts the child once the tree went quiet
		// instead of replying (quietChild).
		a.handled[q.ID] = true
		return
	}
	p := plans[a.rng.IntN(len(plans))]
	if p == planLater && a.putOff[q.ID] < maxPutOff {
		a.putOff[q.ID]++
		return
	}
	if p == planLater {
		p = planAnswer
	}
	a.handled[q.ID] = true
	if t.kills >= t.killBudget && a.rng.IntN(abandonShare) == 0 {
		// Late in the tree's life, a client that walked away.
		a.abandoned++
		return
	}
	at := t.now + int64(a.rng.IntN(3000))
	// A child's question is listed on the root's path; its client replies
	// there or on the child's own path (both are accepted), races the
	// reply with an interrupt of the root or of the child, and now and
	// then lists the child's own pending ones too.
	child := q.SessionID != "" && q.SessionID != t.id
	var path, target string
	if child {
		if a.rng.IntN(2) == 0 {
			path = q.SessionID
		}
		if a.rng.IntN(2) == 0 {
			target = q.SessionID
		}
		if a.rng.IntN(3) == 0 {
			t.addAction(action{at: at + int64(a.rng.IntN(2000)), kind: actList, perms: kindOf(q.ID) == "permission", session: q.SessionID})
		}
	}
	switch p {
	case planAnswer:
		t.addReply(at, t.newReply(q, false, path))
	case planCancel:
		t.addReply(at, t.newReply(q, true, path))
	case planRace:
		t.addReply(at, t.newReply(q, false, path))
		t.addReply(at, t.newReply(q, false, path))
	case planRepeat:
		r := t.newReply(q, a.rng.IntN(4) == 0, path)
		t.addReply(at, r)
		again := *r
		if a.rng.IntN(3) == 0 {
			// A client that reuses a response_id for another reply: only
			// one of the two bodies may win, the other is refused 409.
			again = *t.newReply(q, false, path)
			again.responseID, again.always = r.responseID, false
			again.body = withResponseID(again.body, r.responseID)
		}
		t.addReply(at+int64(a.rng.IntN(2)*a.rng.IntN(2000)), &again)
	case planRaceInterrupt:
		r := t.newReply(q, a.rng.IntN(3) == 0, path)
		in := action{at: at, kind: actInterrupt, session: target}
		if a.rng.IntN(2) == 0 {
			t.addAction(in)
			t.addReply(at, r)
		} else {
			t.addReply(at, r)
			t.addAction(in)
		}
	}
}

// newReply mints a reply with a response id of its own: an answer that
// fits the question (a choice where choices are offered, else free text)
// or a cancel, sent on the path of session path ("": the root's).
func (t *tree) newReply(q listed, cancel bool, path string) *replySpec {
	a := t.ask
	a.minted++
	r := &replySpec{question: q.ID, responseID: fmt.Sprintf("%s-r%d", t.id, a.minted), cancel: cancel, path: path, ledger: -1}
	body := map[string]any{"response_id": r.responseID}
	if kindOf(q.ID) == "permission" {
		// A permission request: a cancel is a plain reject (the turn ends);
		// otherwise once, always, or a reject with a message (only the call
		// fails, the turn goes on).
		r.perm = true
		switch {
		case cancel:
			body["reply"] = "reject"
		case a.rng.IntN(3) == 0:
			body["reply"], body["message"] = "reject", fmt.Sprintf("not now (%d)", a.minted)
			r.cancel = true
		case a.rng.IntN(2) == 0:
			body["reply"], r.always = "always", true
		default:
			body["reply"] = "once"
		}
	} else if cancel {
		body["cancel"] = true
	} else {
		answers := [][]string{}
		for _, qq := range q.Request.Questions {
			ans := fmt.Sprintf("answer %d", a.minted)
			if len(qq.Choices) > 0 {
				ans = qq.Choices[a.rng.IntN(len(qq.Choices))]
			}
			answers = append(answers, []string{ans})
		}
		if len(answers) == 0 { // a listing without the request: one free-text answer
			answers = append(answers, []string{fmt.Sprintf("answer %d", a.minted)})
		}
		body["answers"] = answers
	}
	r.body, _ = json.Marshal(body)
	return r
}

// withResponseID is a reply body with its response_id replaced.
func withResponseID(body []byte, id string) []byte {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	m["response_id"] = id
	out, _ := json.Marshal(m)
	return out
}

// addReply schedules a reply, entering it in the ledger as sent (status 0
// until answered). A repeat of an earlier reply gets an entry of its own.
func (t *tree) addReply(at int64, r *replySpec) {
	r.ledger = len(t.ledger.Replies)
	t.ledger.Replies = append(t.ledger.Replies, check.Reply{Session: t.pathOf(r.path), Question: r.question, ResponseID: r.responseID,
		Cancel: r.cancel, Body: string(r.body)})
	t.addAction(action{at: at, kind: actReply, reply: r})
	if r.always {
		// Once: a repeat of this reply is a copy made after this call.
		r.always = false
		t.addAction(t.work.afterAlways(at + 4_000 + int64(t.ask.rng.IntN(10_000))))
	}
}

func (t *tree) addAction(a action) {
	t.actions = append(t.actions, a)
	sortActions(t.actions)
}

// onReply records a reply's answer: 200 (it won, or repeats the winner),
// 409 with the winner, or 404.
func (t *tree) onReply(r *request) bool {
	spec := r.a.reply
	switch r.status {
	case http.StatusOK, http.StatusConflict, http.StatusNotFound:
	default:
		return false
	}
	l := &t.ledger.Replies[spec.ledger]
	l.At, l.Status, l.Sent, l.Answered = t.now, r.status, r.sent, t.commitPos()
	if r.status == http.StatusConflict {
		var body struct {
			Winner *struct {
				ResponseID string `json:"response_id"`
			} `json:"winner"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil || body.Winner == nil {
			t.failf("reply %s: 409 without a winner: %s", spec.responseID, r.body)
			return true
		}
		l.Winner = body.Winner.ResponseID
	}
	return true
}

// listAfterBoot lists the questions once a guest booted: whatever the
// kills did, every question asked and not resolved must be there.
func (t *tree) listAfterBoot() {
	if t.ask.asks > 0 && t.created {
		t.addAction(action{at: t.now, kind: actList})
	}
	if t.ask.permAsks > 0 && t.created {
		t.addAction(action{at: t.now, kind: actList, perms: true})
	}
}

// kindOf is a blocker id's kind as the lists name it: "permission" for a
// permission request (p-…), "" for a question.
func kindOf(id string) string {
	if strings.HasPrefix(id, "p-") {
		return "permission"
	}
	return ""
}

// listRoute is the path segment of a list of questions or of permission
// requests.
func listRoute(perms bool) string {
	if perms {
		return "permissions"
	}
	return "questions"
}

// listWhenQuiet lists the questions once more when the tree went quiet
// and something committed since the last listing that found nothing new:
// a continuation may have asked again. It reports whether it did.
func (t *tree) listWhenQuiet() bool {
	a := t.ask
	if a.asks == 0 || !t.created || a.quiet >= maxQuietListings || t.commitPos() == a.quietPos {
		return false
	}
	a.quiet++
	t.addAction(action{at: t.now + clientRetry, kind: actList})
	if a.permAsks > 0 {
		t.addAction(action{at: t.now + clientRetry, kind: actList, perms: true})
	}
	return true
}

// aimAtReplyCommit makes the nemesis kill, now and then, right after the
// first commit of the reply about to be sent: the reply is durable, its
// answer never arrives, and the client sends it again to the successor.
func (t *tree) aimAtReplyCommit(g *guest) {
	if t.kills >= t.killBudget || t.rng.IntN(2) != 0 {
		return
	}
	g.plan = &plan{target: SiteKey{Import: abi.ImportSQLCommit, Phase: runtime.PhaseServe, After: true}, nth: 1, window: 1 << 30}
	t.ask.commitPlan = g.plan
}

// replyDone ends a reply request's call: a commit plan that did not fire
// (nothing committed) gives way to an ordinary one.
func (t *tree) replyDone(g *guest) {
	t.ask.inReply = false
	if g.plan != nil && g.plan == t.ask.commitPlan {
		g.plan = nil
	}
	t.ask.commitPlan = nil
}

// countReplyKill counts a kill made while a reply request ran.
func (t *tree) countReplyKill(s runtime.Site) {
	if !t.ask.inReply {
		return
	}
	t.ask.replyKills++
	if s.Import == abi.ImportSQLCommit && s.After {
		t.ask.commitKills++
	}
}
