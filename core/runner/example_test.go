package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/sqlitedb"
)

// An embedder registers its own Go tools with the runner. Here the offline
// model calls a "shout" tool because the prompt says /tool shout {...}.
func ExampleNew() {
	shout := tool.Func{
		Name:         "shout",
		Description:  "Upper-cases a text.",
		Schema:       json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		IsIdempotent: true, // same key, same effect: safe to run again after a crash
		// A tool that declares no default permission asks a person before
		// each call (unless a rule says otherwise); this one needs no approval.
		DefaultPermission: "allow",
		Run: func(ctx context.Context, call tool.Call) (string, error) {
			var args struct{ Text string }
			if err := json.Unmarshal(call.Arguments, &args); err != nil {
				return "", err
			}
			return strings.ToUpper(args.Text), nil
		},
	}
	tools, err := tool.NewRegistry(shout, tool.KVGet(), tool.KVPut())
	if err != nil {
		log.Fatal(err)
	}
	clock := exampleClock{}
	driver, err := runner.New(offline.New(clock, offline.Options{}), tools, runner.NewConfig())
	if err != nil {
		log.Fatal(err)
	}

	dir, _ := os.MkdirTemp("", "revenant-example")
	defer os.RemoveAll(dir)
	db, err := sqlitedb.Open(filepath.Join(dir, "tree.db"), sqlitedb.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	inst, _, err := recovery.Boot(ctx, core.Host{DB: db, Clock: clock, Wake: exampleWake{}, IDs: &exampleIDs{}}, core.NewConfig(), driver)
	if err != nil {
		log.Fatal(err)
	}
	defer inst.Close(ctx)

	s, _ := inst.CreateSession(ctx, core.NewSession{Principal: "me"})
	if _, err := inst.Admit(ctx, s.ID, core.PromptInput{Text: "/tool shout {\"text\":\"durable\"}\nplease"}); err != nil {
		log.Fatal(err)
	}
	if err := inst.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	evs, _ := inst.Events(ctx, s.ID, 0, 0)
	for _, ev := range evs {
		if ev.Type == event.StepCompleted {
			var d event.StepDone
			_ = ev.Decode(&d)
			if d.Text != "" {
				fmt.Println(d.Text)
			}
		}
	}
	// Output:
	// Tool shout returned: DURABLE
	// You said: please
}

type exampleClock struct{}

func (exampleClock) Now() int64 { return time.Now().UnixMilli() }
func (exampleClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// exampleWake is enough in process: the next Boot sweeps from the database.
type exampleWake struct{}

func (exampleWake) Arm(context.Context, int64) error { return nil }

type exampleIDs struct{ n atomic.Int64 }

func (g *exampleIDs) NewID() string { return fmt.Sprintf("id%d", g.n.Add(1)) }
