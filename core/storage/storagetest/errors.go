package storagetest

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
)

var errorCases = []testCase{
	{"a constraint violation is coded and permanent", constraintIsPermanent},
	{"a statement SQLite rejects is SQLITE_ERROR and permanent", statementErrorIsPermanent},
}

// Extended codes of https://sqlite.org/rescode.html.
const (
	constraintCheck      = storage.CodeConstraint | 1<<8
	constraintNotNull    = storage.CodeConstraint | 5<<8
	constraintPrimaryKey = storage.CodeConstraint | 6<<8
	constraintUnique     = storage.CodeConstraint | 8<<8
)

func constraintIsPermanent(t conform.T, newDB NewDB) {
	db := newDB(t)
	exec(t, db, `CREATE TABLE p (id TEXT PRIMARY KEY, name TEXT UNIQUE, n INTEGER NOT NULL CHECK (n >= 0))`)
	exec(t, db, `INSERT INTO p VALUES ('p', 'name', 1)`)
	for _, tc := range []struct {
		name  string
		query string
		code  storage.Code
	}{
		{"primary key", `INSERT INTO p VALUES ('p', 'other', 1)`, constraintPrimaryKey},
		{"unique", `INSERT INTO p VALUES ('q', 'name', 1)`, constraintUnique},
		{"not null", `INSERT INTO p VALUES ('q', 'other', NULL)`, constraintNotNull},
		{"check", `INSERT INTO p VALUES ('q', 'other', -1)`, constraintCheck},
	} {
		var inner error
		err := db.Tx(bg, func(tx storage.Tx) error {
			if _, err := tx.Exec(`INSERT INTO p VALUES ('earlier', 'earlier', 1)`); err != nil {
				return err
			}
			_, inner = tx.Exec(tc.query)
			return inner
		})
		require.Error(t, err, tc.name)
		assert.Same(t, inner, err, "%s: fn's error is returned unchanged", tc.name)
		var se *storage.Error
		assert.ErrorAs(t, err, &se, tc.name)
		assert.ErrorIs(t, err, storage.CodeConstraint, tc.name)
		assert.Equal(t, tc.code, storage.CodeOf(err), "%s: the extended code is kept", tc.name)
		assert.False(t, storage.IsTransient(err), tc.name)
	}
	assert.Equal(t, int64(1), one(t, db, `SELECT count(*) FROM p`), "every failed transaction rolled back")
}

func statementErrorIsPermanent(t conform.T, newDB NewDB) {
	db := newDB(t)
	for name, query := range map[string]string{
		"syntax":         `SELEC 1`,
		"unknown table":  `SELECT * FROM nowhere`,
		"unknown column": `SELECT nothing`,
	} {
		err := db.Tx(bg, func(tx storage.Tx) error {
			_, err := tx.Query(query)
			return err
		})
		require.Error(t, err, name)
		assert.ErrorIs(t, err, storage.CodeError, name)
		assert.Equal(t, storage.CodeError, storage.CodeOf(err).Primary(), name)
		assert.False(t, storage.IsTransient(err), name)
	}
}
