package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAudit checks that the log checker catches what it claims to catch,
// on logs written by hand: a checker that passes everything would make
// every kill scenario pass too.
func TestAudit(t *testing.T) {
	created := ev{Type: typeCreated}
	admit := func(p string) ev { return ev{Type: typeAdmitted, P: payload{PromptID: p}} }
	turnStart := func(p, x string) ev {
		return ev{Type: typeStarted, P: payload{PromptID: p, ExecutionID: x, Cause: "prompt", TurnStart: true}}
	}
	resumeStart := func(p, x string) ev {
		return ev{Type: typeStarted, P: payload{PromptID: p, ExecutionID: x, Cause: "resume"}}
	}
	resumed := func(p, x string, n int) ev {
		return ev{Type: typeResumed, P: payload{PromptID: p, ExecutionID: x, Attempt: n}}
	}
	step := func(p, x, s string) ev {
		return ev{Type: typeStepStarted, P: payload{PromptID: p, ExecutionID: x, StepID: s}}
	}
	done := func(s string) ev { return ev{Type: typeStepDone, P: payload{StepID: s}} }
	ok := func(p, x string) ev { return ev{Type: typeSucceeded, P: payload{PromptID: p, ExecutionID: x}} }
	failed := func(p, x string) ev {
		return ev{Type: typeFailed, P: payload{PromptID: p, ExecutionID: x, Kind: "model"}}
	}
	interrupted := func(p, x, why string) ev {
		return ev{Type: typeInterrupted, P: payload{PromptID: p, ExecutionID: x, Reason: why}}
	}
	cancelled := func(p, why string) ev { return ev{Type: typeCancelled, P: payload{PromptID: p, Reason: why}} }

	cases := []struct {
		name     string
		log      []ev
		accepted []string
		want     string // a fragment of the violation; "" for none
	}{
		{"clean turn", []ev{created, admit("A"), turnStart("A", "x1"), step("A", "x1", "s1"), done("s1"), ok("A", "x1")}, []string{"A"}, ""},
		{"resumed turn", []ev{created, admit("A"), turnStart("A", "x1"), step("A", "x1", "s1"),
			resumed("A", "x1", 1), resumeStart("A", "x2"), step("A", "x2", "s2"), done("s2"), ok("A", "x2")}, []string{"A"}, ""},
		{"interrupt and cancel", []ev{created, admit("A"), admit("B"), turnStart("A", "x1"), interrupted("A", "x1", "user"), cancelled("B", "user")}, []string{"A", "B"}, ""},
		{"shutdown then resume", []ev{created, admit("A"), turnStart("A", "x1"), interrupted("A", "x1", "shutdown"),
			resumed("A", "x1", 1), resumeStart("A", "x2"), ok("A", "x2")}, nil, ""},
		{"two terminals", []ev{created, admit("A"), turnStart("A", "x1"), ok("A", "x1"), failed("A", "x1")}, nil, "after its end"},
		{"resume after interrupt", []ev{created, admit("A"), turnStart("A", "x1"), interrupted("A", "x1", "user"), resumed("A", "x1", 1)}, nil, "after its end"},
		{"start after interrupt", []ev{created, admit("A"), turnStart("A", "x1"), interrupted("A", "x1", "user"), resumeStart("A", "x2")}, nil, "after its end"},
		{"step after its turn ended", []ev{created, admit("A"), turnStart("A", "x1"), step("A", "x1", "s1"), interrupted("A", "x1", "user"), done("s1")}, nil, "after its end"},
		{"cancelled then run", []ev{created, admit("A"), admit("B"), turnStart("A", "x1"), interrupted("A", "x1", "user"), cancelled("B", "user"), turnStart("B", "x2")}, nil, "after its end"},
		{"never ended", []ev{created, admit("A"), turnStart("A", "x1")}, nil, "never ended"},
		{"never ended after shutdown", []ev{created, admit("A"), turnStart("A", "x1"), interrupted("A", "x1", "shutdown")}, nil, "never ended"},
		{"lost prompt", []ev{created, admit("A"), turnStart("A", "x1"), ok("A", "x1")}, []string{"A", "B"}, "lost"},
		{"out of order", []ev{created, admit("A"), admit("B"), turnStart("B", "x1"), ok("B", "x1"), turnStart("A", "x2"), ok("A", "x2")}, nil, "admission order"},
		{"overlapping turns", []ev{created, admit("A"), admit("B"), turnStart("A", "x1"), turnStart("B", "x2"), ok("A", "x1"), ok("B", "x2")}, nil, "is open"},
		{"resume not counted", []ev{created, admit("A"), turnStart("A", "x1"), resumeStart("A", "x2"), ok("A", "x2")}, nil, "without its own execution.resumed"},
		{"shutdown, no resume", []ev{created, admit("A"), turnStart("A", "x1"), interrupted("A", "x1", "shutdown"), ok("A", "x1")}, nil, "without a resume"},
		{"admitted twice", []ev{created, admit("A"), admit("A"), turnStart("A", "x1"), ok("A", "x1")}, nil, "admitted twice"},
		{"gap", []ev{created, admit("A"), turnStart("A", "x1"), ok("A", "x1")}, nil, "contiguous"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := make([]ev, len(c.log))
			for i, e := range c.log {
				e.Seq = int64(i + 1)
				if c.name == "gap" && i > 1 {
					e.Seq++
				}
				log[i] = e
			}
			_, bad := audit(log, c.accepted)
			if c.want == "" {
				assert.Empty(t, bad)
				return
			}
			assert.True(t, strings.Contains(strings.Join(bad, "\n"), c.want), "want a violation with %q, got %q", c.want, bad)
		})
	}
}
