package sim

import (
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// conn is the host-owned connection of one guest: a process of its own, in
// the simulator's model. A kill closes it (SQLite rolls back whatever
// transaction the guest left open, as the death of a process would); a
// zombie keeps its own while its successor boots on a new one.
//
// It is sqlitedb's connection with the simulator's options: synchronous=OFF
// (the nemesis kills processes, not machines, and a killed process loses
// nothing the operating system already has; fsync would only make the
// campaign slower) and no busy wait (every connection of a tree runs on
// this goroutine: a wait could not end a conflict, only delay it). Its
// statements outside a transaction (the simulator's own reads of the
// epoch and the log) run on their own.
type conn struct {
	*sqlitedb.Conn
	// onBegin and onCommit, when set, hear of every transaction begun and
	// of every commit that changed rows (how many), whether or not the
	// guest emits anything after it. onCommit runs once the transaction
	// has ended, so it may read on the connection.
	onBegin  func()
	onCommit func(changes int64)
	// onTried, when set, hears of every COMMIT once it returned, whether
	// it succeeded or was reported failed (err: a late IOERR may have made
	// it durable all the same).
	onTried func(err error)
	// onCommitting, when set, hears of every COMMIT before it runs, with
	// the transaction still open (what it wrote is seen on the
	// connection, not yet on others).
	onCommitting func()
	// onBusy, when set, hears of every BEGIN refused SQLITE_BUSY: another
	// connection held the write lock (bootfault.go).
	onBusy func()
}

var _ runtime.Conn = (*conn)(nil)

// openConn opens the tree's file, through the named VFS when vfs is not
// empty (the tree's disk-full fault).
func openConn(path, vfs string) (*conn, error) {
	c := &conn{}
	db, err := sqlitedb.Open(path, sqlitedb.Options{VFS: vfs, NoSync: true, BusyTimeout: -1,
		Hooks: sqlitedb.Hooks{Begin: c.began, Commit: c.committed}})
	if err != nil {
		return nil, err
	}
	c.Conn = db.Conn()
	return c, nil
}

func (c *conn) close() error { return c.Close() }

// Begin is sqlitedb's, then tells onBusy of a refusal for the write lock.
func (c *conn) Begin() error {
	err := c.Conn.Begin()
	if err != nil && storage.CodeOf(err).Primary() == storage.CodeBusy && c.onBusy != nil {
		c.onBusy()
	}
	return err
}

// Commit is sqlitedb's, then tells onTried.
func (c *conn) Commit() error {
	if c.onCommitting != nil {
		c.onCommitting()
	}
	err := c.Conn.Commit()
	if c.onTried != nil {
		c.onTried(err)
	}
	return err
}

func (c *conn) began() {
	if c.onBegin != nil {
		c.onBegin()
	}
}

func (c *conn) committed(changes int64) {
	if changes > 0 && c.onCommit != nil {
		c.onCommit(changes)
	}
}
