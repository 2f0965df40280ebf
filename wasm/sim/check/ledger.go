package check

// Ledger is what the outside world saw a tree do: every request that reached
// a tool's receiver, and every write a superseded instance managed to commit.
// Whoever answers the tree's egress keeps it (the simulator's Services); the
// checker never trusts the tree's own account of its effects.
type Ledger struct {
	// Deliveries are the tool requests that reached a receiver, in the
	// order they arrived.
	Deliveries []Delivery `json:"deliveries,omitempty"`
	// ZombieCommits are writes that committed, and egress that started,
	// from an instance after its successor took a newer epoch on the same
	// database. There must be none.
	ZombieCommits []ZombieCommit `json:"zombie_commits,omitempty"`
	// Accepted are the prompt ids the API answered 202: each must be in
	// the log, whatever was killed after the answer.
	Accepted []string `json:"accepted,omitempty"`
	// Interrupts are the interrupt requests the API answered 200: every
	// prompt of the session admitted before the request was sent must have
	// ended by the answer, or a kill after it could revive the turn.
	Interrupts []Interrupt `json:"interrupts,omitempty"`
	// InterruptsSent are the interrupt requests the clients sent, one
	// entry per send (a resend or a retry after a 5xx included), answered
	// or not: At is when it was sent, Sent the commit position then,
	// Answered the commit position when its answer came (0: none came,
	// its instance was killed first). Only
	// an interrupt of a child itself may end a prompt a client sent that
	// child (RuleChildOwnPrompt).
	InterruptsSent []Interrupt `json:"interrupts_sent,omitempty"`
	// FinalAsks names the tools whose ask the operator made final (a server
	// rule with "final": true): every call of them asks, and an always
	// reply approves that call only (RuleFinalAsk).
	FinalAsks []string `json:"final_asks,omitempty"`
	// Tools names every tool whose effects the ledger records, with whether
	// its receiver deduplicates by Idempotency-Key. A call of such a tool
	// that settled ok must have reached its receiver.
	Tools map[string]bool `json:"tools,omitempty"`
	// Observed are violations the host saw at a moment of the run that
	// the final database can no longer show (moment.go): a claim left
	// without a wake-up, an open prompt without a claim, a boot that left
	// a claim for later.
	Observed []Observation `json:"observed,omitempty"`
	// Emits are the durable events the host received through emit (nil:
	// not recorded).
	Emits *Emits `json:"emits,omitempty"`
	// Listings are the pending-question lists the API answered 200
	// (questions.go): each must show every question asked and not yet
	// resolved, and nothing else.
	Listings []Listing `json:"listings,omitempty"`
	// Replies are the replies to questions the clients sent, answered or
	// not (Status 0: the instance died first). A question may be resolved
	// only by one of them, or by the user's interrupt.
	Replies []Reply `json:"replies,omitempty"`
	// Budget is the resume budget the tree ran with (0: core's default),
	// for a check that is given none (Options.Budget 0).
	Budget int `json:"budget,omitempty"`
	// Retry is the provider retry settings the tree ran with (nil: the
	// defaults), for the rules of provider retries (retry.go).
	Retry *RetryPolicy `json:"retry,omitempty"`
	// Hints are the provider failures that asked for a wait (a 429 with
	// Retry-After or retry-after-ms): a retry of one must not come sooner
	// (RuleRetryHint).
	Hints []Hint `json:"hints,omitempty"`
	// Wakes are the deliveries of the wake-up to a serving instance, in
	// order (RuleStartsHere).
	Wakes []Wake `json:"wakes,omitempty"`
	// Delete is what the clients and the host saw of the tree's deletion
	// (nil: no client deleted it; delete.go).
	Delete *Deletion `json:"delete,omitempty"`
}

// Hint is one provider failure that named a wait. Its error message
// carries Mark, which the turn's session.retry.scheduled@1 quotes in its
// reason, so the checker knows which failure a retry answers.
type Hint struct {
	Mark string `json:"mark"`
	// Answered is when the failure was answered (ms; the retry's delay
	// counts from no earlier), Wait the wait it asked for (ms).
	Answered int64 `json:"answered"`
	Wait     int64 `json:"wait"`
}

// RetryPolicy is a tree's provider retry settings, as the checker needs
// them.
type RetryPolicy struct {
	// Retries is how often one step's retryable failure is retried
	// (settings.ModelRetries; 0: the default, 6).
	Retries int `json:"retries"`
	// MaxDelay bounds the wait before a retry, in ms: the longer of the
	// schedule's longest delay and the cap on a provider's Retry-After
	// (0: the defaults', 60 s).
	MaxDelay int64 `json:"max_delay"`
}

// Delivery is one request that reached a tool's receiver.
type Delivery struct {
	At         int64  `json:"at"` // virtual ms when the request arrived
	Tool       string `json:"tool"`
	CallID     string `json:"call_id"`         // X-Revenant-Call-Id
	Key        string `json:"idempotency_key"` // Idempotency-Key
	Idempotent bool   `json:"idempotent"`      // the receiver deduplicates by key
	// Applied is true when the receiver applied the effect: always for a
	// non-idempotent receiver, the first time per key for an idempotent one.
	Applied bool `json:"applied"`
	// Boot numbers the instance that sent it (1 for the tree's first boot).
	Boot int `json:"boot"`
	// Gseq is where the request arrived in the tree's commit order: the
	// highest events.gseq committed by then (0: not known). Virtual time
	// stands still within a guest call, so only this tells an effect that
	// started after a commit of the same millisecond from one before it.
	Gseq int64 `json:"gseq,omitempty"`
}

// Interrupt is an interrupt request the API answered 200. Sent and
// Answered are the highest events.gseq committed when the request was last
// sent and when its answer ended (0: not known).
type Interrupt struct {
	Session  string `json:"session"`
	At       int64  `json:"at"` // virtual ms of the answer (InterruptsSent: of the send)
	Sent     int64  `json:"sent"`
	Answered int64  `json:"answered"`
}

// ZombieCommit is a write a superseded instance committed (a new epoch
// taken over its successor's among them).
type ZombieCommit struct {
	At     int64  `json:"at"`
	Boot   int    `json:"boot"`   // the zombie's boot number
	Latest int    `json:"latest"` // the boot that superseded it
	What   string `json:"what"`   // what it committed (its events) or started
}

// Record appends a delivery, deciding Applied the way the receiver would.
func (l *Ledger) Record(d Delivery) Delivery {
	d.Applied = true
	if d.Idempotent {
		for _, prev := range l.Deliveries {
			if prev.Idempotent && prev.Tool == d.Tool && prev.Key == d.Key && prev.Applied {
				d.Applied = false
				break
			}
		}
	}
	l.Deliveries = append(l.Deliveries, d)
	return d
}
