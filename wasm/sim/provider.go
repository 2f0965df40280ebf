package sim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// The scripted model fails retryably now and then, as a real provider does
// (a 429 with Retry-After or retry-after-ms, a 503 or a 500 without a hint,
// a connection that breaks), so turns sleep on scheduled retries
// (session.retry.scheduled@1, claims with retry_at), retries come due from
// the wake-up, and some steps fail more often than the tree's retry budget
// allows, failing their turn with type model (check.RuleRetryBudget).
//
// Whether a step fails, and how often, is a pure function of the seed and
// the step the request asks for: the prompt and the steps answered before
// (providerKey). A retried request is the very same request, so the
// failures of one step are counted by the simulator (tree.asked): the
// step's n-th request gets its n-th answer, whichever instance sends it,
// a kill and resume included (the guest's retry count is durable too).
// The count is part of the tree's sequential simulation, so a campaign
// stays a function of its seed.

// Retry settings of the trees that run the scripted model: a small budget
// (retryBudgetMax at most), so steps that fail past it are common, and
// delays of up to 20 s, longer than the wake interval (10 s), so sweeps run
// while claims sleep and their re-arm must cover the earliest retry.
const (
	retryBudgetMax = 3
	retryInitial   = time.Second
	retryMax       = 8 * time.Second
	maxRetryAfter  = 20 * time.Second
)

// retriesFor is tree i's provider retry budget, drawn on a generator of
// its own so it changes nothing else the tree draws.
func (c Config) retriesFor(i int) int {
	rng := stream(c.Seed, keyRetries, i)
	return 1 + rng.IntN(retryBudgetMax)
}

// retryPolicy is what the ledger records of a tree's retry settings.
func retryPolicy(retries int) *check.RetryPolicy {
	return &check.RetryPolicy{Retries: retries, MaxDelay: max(retryMax, maxRetryAfter).Milliseconds()}
}

// providerKey is the step a scripted model request asks for: the prompt
// and how many steps of it were answered with tool calls.
func providerKey(body []byte) string {
	var req struct {
		Messages []struct {
			Role      string          `json:"role"`
			Content   *string         `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return string(body)
	}
	prompt, done := -1, 0
	for i, m := range req.Messages {
		if m.Role == "user" && m.Content != nil && *m.Content != event.ContinuationNotice {
			prompt, done = i, 0
		}
		if m.Role == "assistant" && len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" && prompt >= 0 {
			done++
		}
	}
	if prompt < 0 {
		return string(body)
	}
	return fmt.Sprintf("%d\x00%s", done, *req.Messages[prompt].Content)
}

// stepRng is a generator of the seed and a step's key (and a salt).
func stepRng(seed uint64, key string, salt uint64) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return rand.New(rand.NewPCG(seed^keyProvider, h.Sum64()+salt))
}

// failures is how many times the step of key fails before it is answered:
// none for most steps, 1 to budget for some, one more than budget (so the
// turn fails model) for a few.
func failures(seed uint64, key string, budget int) int {
	rng := stepRng(seed, key, 0)
	switch r := rng.IntN(100); {
	case r < 65:
		return 0
	case r < 88:
		return 1 + rng.IntN(max(budget, 1))
	default:
		return budget + 1
	}
}

// providerFailure fills r with the scripted model's failure for the
// attempt-th request of the step of key (0-based), or reports false when
// that request is answered.
func (t *tree) providerFailure(r *reply, body []byte) bool {
	key := providerKey(body)
	if t.asked == nil {
		t.asked = map[string]int{}
	}
	attempt := t.asked[key]
	t.asked[key]++
	if attempt >= failures(t.seed, key, t.ledger.Retry.Retries) {
		return false
	}
	t.providerFails++
	rng := stepRng(t.seed, key, uint64(attempt)+1)
	r.ctype = "application/json"
	// The mark names this failure in the message, which the retry's event
	// quotes, so the checker can find the wait it asked for.
	mark := fmt.Sprintf("[failure %d]", t.providerFails)
	errBody := func(msg string) []byte {
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": msg + " " + mark, "type": "server_error"}})
		return b
	}
	hint := func(wait time.Duration) {
		t.ledger.Hints = append(t.ledger.Hints, check.Hint{Mark: mark, Answered: r.at, Wait: wait.Milliseconds()})
	}
	switch rng.IntN(5) {
	case 0:
		secs := 1 + rng.IntN(15)
		r.status, r.body = http.StatusTooManyRequests, errBody("rate limited (simulated)")
		r.header = http.Header{"Retry-After": {strconv.Itoa(secs)}}
		hint(time.Duration(secs) * time.Second)
	case 1:
		ms := 200 + rng.IntN(9800)
		r.status, r.body = http.StatusTooManyRequests, errBody("rate limited (simulated)")
		r.header = http.Header{"Retry-After-Ms": {strconv.Itoa(ms)}}
		hint(time.Duration(ms) * time.Millisecond)
	case 2:
		r.status, r.body = http.StatusServiceUnavailable, errBody("overloaded (simulated)")
	case 3:
		r.status, r.body = http.StatusInternalServerError, errBody("internal error (simulated)")
	default:
		r.errMsg = "connection reset by peer (simulated)"
	}
	return true
}
