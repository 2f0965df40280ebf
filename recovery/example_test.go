package recovery_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/sqlitedb"
)

// Embedding revenant as a Go library: one tree on a local SQLite file, a
// driver standing in for the turn runner, a prompt answered, another one
// interrupted. README.md shows the body of this function.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "revenant-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// One SQLite file per tree: WAL, synchronous=FULL, busy timeout, foreign keys.
	db, err := sqlitedb.Open(filepath.Join(dir, "tree.db"), sqlitedb.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	wake := &timerWake{}
	host := core.Host{DB: db, Clock: systemClock{}, Wake: wake, IDs: randomIDs{}}

	// The driver does a turn's work; every durable write goes through x.Append.
	driver := core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		if strings.HasPrefix(x.Prompt(), "wait") {
			<-ctx.Done() // a long turn, stopped by the interrupt below
			return core.Outcome{Kind: core.Stopped}
		}
		_, err := x.Append(ctx, true, core.NewEvent{Type: event.MessageAdded, Payload: event.Message{
			MessageID: x.ID() + ".answer", PromptID: x.PromptID(), Role: event.RoleAssistant, Text: "echo: " + x.Prompt()}})
		if err != nil {
			return core.Outcome{Kind: core.Stopped} // fenced: a newer instance owns the turn
		}
		return core.Outcome{Kind: core.Succeeded}
	})

	// Boot migrates, takes a new epoch, sweeps what a previous process left
	// claimed, and re-arms the wake-up.
	inst, _, err := recovery.Boot(ctx, host, core.NewConfig(), driver)
	if err != nil {
		log.Fatal(err)
	}
	wake.OnFire(func() { recovery.Wake(context.Background(), inst) })
	defer wake.Stop()

	s, err := inst.CreateSession(ctx, core.NewSession{Principal: "me"})
	if err != nil {
		log.Fatal(err)
	}
	// Admit returns once the prompt and its claim are durable.
	if _, err := inst.Admit(ctx, s.ID, core.PromptInput{ClientID: "p1", Text: "hello"}); err != nil {
		log.Fatal(err)
	}
	if err := inst.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := inst.Admit(ctx, s.ID, core.PromptInput{ClientID: "p2", Text: "wait for me"}); err != nil {
		log.Fatal(err)
	}
	// Interrupt returns only after the interrupt is committed.
	interrupted, err := inst.Interrupt(ctx, s.ID, event.ReasonUser)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("interrupted:", interrupted)

	// A graceful stop: running executions record shutdown and keep their claims.
	if err := inst.Close(ctx); err != nil {
		log.Fatal(err)
	}

	evs, err := inst.Events(ctx, s.ID, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range evs {
		fmt.Println(e.Seq, e.Type)
	}
	// Output:
	// interrupted: true
	// 1 session.created@1
	// 2 session.prompt.admitted@1
	// 3 session.execution.started@1
	// 4 session.message.added@1
	// 5 session.message.added@1
	// 6 session.execution.succeeded@1
	// 7 session.prompt.admitted@1
	// 8 session.execution.started@1
	// 9 session.message.added@1
	// 10 session.execution.interrupted@1
}

// systemClock is the real clock, in milliseconds.
type systemClock struct{}

func (systemClock) Now() int64 { return time.Now().UnixMilli() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// randomIDs mints 128-bit random ids.
type randomIDs struct{}

func (randomIDs) NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// timerWake is an in-process wake-up: one timer, moved earlier when asked.
// It does not survive the process, which is fine in process: the next
// recovery.Boot sweeps and re-arms from the database (DESIGN §4 rule 3).
type timerWake struct {
	mu    sync.Mutex
	timer *time.Timer
	at    int64
	fire  func()
}

func (w *timerWake) Arm(_ context.Context, at int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil && w.at <= at {
		return nil // an earlier wake-up is already set
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.at = at
	w.timer = time.AfterFunc(time.Until(time.UnixMilli(at)), func() {
		w.mu.Lock()
		w.timer, w.at = nil, 0 // a delivered wake-up is used up
		fire := w.fire
		w.mu.Unlock()
		if fire != nil {
			fire()
		}
	})
	return nil
}

// OnFire sets what a delivered wake-up runs: recovery.Wake.
func (w *timerWake) OnFire(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fire = f
}

// Stop cancels a pending wake-up.
func (w *timerWake) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer, w.at = nil, 0
	}
}
