package sqlitedb

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core/storage"
)

// Conn is the tree's connection with explicit transactions, for a host
// whose guest drives BEGIN and COMMIT through imports (the wazero backend,
// wasm/runtime, and the simulator's host). It shares the DB's connection,
// settings, statement cache and hooks; do not use Tx and Conn's
// transactions at the same time.
//
// Begin takes the DB's lock and Commit or Rollback releases it, so a
// transaction holds the connection from BEGIN to its end, as Tx does. A
// statement outside a transaction runs on its own (SQLite's autocommit),
// under the lock for just that statement.
type Conn struct {
	db   *DB
	inTx bool
}

// Conn returns the explicit-transaction view of db.
func (db *DB) Conn() *Conn { return &Conn{db: db} }

// Begin starts a write transaction (BEGIN IMMEDIATE).
func (c *Conn) Begin() error {
	if c.inTx {
		return fmt.Errorf("begin: a transaction is already open")
	}
	c.db.mu.Lock()
	if c.db.conn == nil {
		c.db.mu.Unlock()
		return ErrClosed
	}
	if err := c.db.conn.Exec("BEGIN IMMEDIATE"); err != nil {
		c.db.rollbackIfOpen()
		c.db.mu.Unlock()
		return fmt.Errorf("begin: %w", mapErr(err))
	}
	c.inTx = true
	c.db.begun()
	return nil
}

// Exec runs a statement, inside the open transaction if there is one.
func (c *Conn) Exec(query string, args []any) (int64, error) {
	if !c.inTx {
		unlock, err := c.lock()
		if err != nil {
			return 0, fmt.Errorf("exec: %w", err)
		}
		defer unlock()
	}
	return tx{c.db}.Exec(query, args...)
}

// Query runs a statement, inside the open transaction if there is one,
// and reads every row.
func (c *Conn) Query(query string, args []any) (*storage.Rows, error) {
	if !c.inTx {
		unlock, err := c.lock()
		if err != nil {
			return nil, fmt.Errorf("query: %w", err)
		}
		defer unlock()
	}
	return tx{c.db}.Query(query, args...)
}

// lock takes the DB's lock for one statement outside a transaction.
func (c *Conn) lock() (unlock func(), err error) {
	c.db.mu.Lock()
	if c.db.conn == nil {
		c.db.mu.Unlock()
		return nil, ErrClosed
	}
	return c.db.mu.Unlock, nil
}

// Commit commits. A COMMIT that fails with BUSY leaves the transaction
// open (InTx stays true): roll it back before running it again.
func (c *Conn) Commit() error {
	if !c.inTx {
		return errors.New("commit: no transaction is open")
	}
	if err := c.db.conn.Exec("COMMIT"); err != nil {
		if c.db.conn.GetAutocommit() {
			c.end()
		}
		return fmt.Errorf("commit: %w", mapErr(err))
	}
	n := c.db.changed()
	c.end()
	c.db.afterCommit(n)
	return nil
}

// Rollback rolls back the open transaction; without one it does nothing.
func (c *Conn) Rollback() error {
	if !c.inTx {
		return nil
	}
	prev := c.db.conn.SetInterrupt(context.Background())
	err := c.db.conn.Exec("ROLLBACK")
	c.db.conn.SetInterrupt(prev)
	if err != nil && !c.db.conn.GetAutocommit() {
		return fmt.Errorf("rollback: %w", mapErr(err))
	}
	c.end()
	return nil
}

// InTx reports whether a transaction is open.
func (c *Conn) InTx() bool { return c.inTx }

// Close closes the DB. A transaction left open is rolled back by SQLite,
// as at the death of the process that held it: a simulator's kill.
func (c *Conn) Close() error {
	if !c.inTx {
		return c.db.Close()
	}
	err := c.db.closeLocked()
	c.end()
	return err
}

func (c *Conn) end() {
	c.inTx = false
	c.db.mu.Unlock()
}
