package storage

import (
	"fmt"
	"strings"
)

// codeNames are SQLite's names of its result codes, primary and extended
// (https://sqlite.org/rescode.html). The Durable Object bridge only gets
// error text from the platform; it maps the SQLITE_* name in that text to
// these codes (CodeFromText), so classification is the same on every host.
var codeNames = map[Code]string{
	1: "SQLITE_ERROR", 2: "SQLITE_INTERNAL", 3: "SQLITE_PERM", 4: "SQLITE_ABORT", 5: "SQLITE_BUSY",
	6: "SQLITE_LOCKED", 7: "SQLITE_NOMEM", 8: "SQLITE_READONLY", 9: "SQLITE_INTERRUPT", 10: "SQLITE_IOERR",
	11: "SQLITE_CORRUPT", 12: "SQLITE_NOTFOUND", 13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN", 15: "SQLITE_PROTOCOL",
	16: "SQLITE_EMPTY", 17: "SQLITE_SCHEMA", 18: "SQLITE_TOOBIG", 19: "SQLITE_CONSTRAINT", 20: "SQLITE_MISMATCH",
	21: "SQLITE_MISUSE", 22: "SQLITE_NOLFS", 23: "SQLITE_AUTH", 24: "SQLITE_FORMAT", 25: "SQLITE_RANGE",
	26: "SQLITE_NOTADB", 27: "SQLITE_NOTICE", 28: "SQLITE_WARNING",

	CodeError | 1<<8: "SQLITE_ERROR_MISSING_COLLSEQ", CodeError | 2<<8: "SQLITE_ERROR_RETRY",
	CodeError | 3<<8: "SQLITE_ERROR_SNAPSHOT", CodeError | 4<<8: "SQLITE_ERROR_RESERVESIZE",
	CodeError | 5<<8: "SQLITE_ERROR_KEY", CodeError | 6<<8: "SQLITE_ERROR_UNABLE",

	CodeIOErr | 1<<8: "SQLITE_IOERR_READ", CodeIOErr | 2<<8: "SQLITE_IOERR_SHORT_READ",
	CodeIOErr | 3<<8: "SQLITE_IOERR_WRITE", CodeIOErr | 4<<8: "SQLITE_IOERR_FSYNC",
	CodeIOErr | 5<<8: "SQLITE_IOERR_DIR_FSYNC", CodeIOErr | 6<<8: "SQLITE_IOERR_TRUNCATE",
	CodeIOErr | 7<<8: "SQLITE_IOERR_FSTAT", CodeIOErr | 8<<8: "SQLITE_IOERR_UNLOCK",
	CodeIOErr | 9<<8: "SQLITE_IOERR_RDLOCK", CodeIOErr | 10<<8: "SQLITE_IOERR_DELETE",
	CodeIOErr | 11<<8: "SQLITE_IOERR_BLOCKED", CodeIOErr | 12<<8: "SQLITE_IOERR_NOMEM",
	CodeIOErr | 13<<8: "SQLITE_IOERR_ACCESS", CodeIOErr | 14<<8: "SQLITE_IOERR_CHECKRESERVEDLOCK",
	CodeIOErr | 15<<8: "SQLITE_IOERR_LOCK", CodeIOErr | 16<<8: "SQLITE_IOERR_CLOSE",
	CodeIOErr | 17<<8: "SQLITE_IOERR_DIR_CLOSE", CodeIOErr | 18<<8: "SQLITE_IOERR_SHMOPEN",
	CodeIOErr | 19<<8: "SQLITE_IOERR_SHMSIZE", CodeIOErr | 20<<8: "SQLITE_IOERR_SHMLOCK",
	CodeIOErr | 21<<8: "SQLITE_IOERR_SHMMAP", CodeIOErr | 22<<8: "SQLITE_IOERR_SEEK",
	CodeIOErr | 23<<8: "SQLITE_IOERR_DELETE_NOENT", CodeIOErr | 24<<8: "SQLITE_IOERR_MMAP",
	CodeIOErr | 25<<8: "SQLITE_IOERR_GETTEMPPATH", CodeIOErr | 26<<8: "SQLITE_IOERR_CONVPATH",
	CodeIOErr | 27<<8: "SQLITE_IOERR_VNODE", CodeIOErr | 28<<8: "SQLITE_IOERR_AUTH",
	CodeIOErr | 29<<8: "SQLITE_IOERR_BEGIN_ATOMIC", CodeIOErr | 30<<8: "SQLITE_IOERR_COMMIT_ATOMIC",
	CodeIOErr | 31<<8: "SQLITE_IOERR_ROLLBACK_ATOMIC", CodeIOErr | 32<<8: "SQLITE_IOERR_DATA",
	CodeIOErr | 33<<8: "SQLITE_IOERR_CORRUPTFS", CodeIOErr | 34<<8: "SQLITE_IOERR_IN_PAGE",
	CodeIOErr | 35<<8: "SQLITE_IOERR_BADKEY", CodeIOErr | 36<<8: "SQLITE_IOERR_CODEC",

	CodeLocked | 1<<8: "SQLITE_LOCKED_SHAREDCACHE", CodeLocked | 2<<8: "SQLITE_LOCKED_VTAB",
	CodeBusy | 1<<8: "SQLITE_BUSY_RECOVERY", CodeBusy | 2<<8: "SQLITE_BUSY_SNAPSHOT", CodeBusy | 3<<8: "SQLITE_BUSY_TIMEOUT",

	CodeCantOpen | 1<<8: "SQLITE_CANTOPEN_NOTEMPDIR", CodeCantOpen | 2<<8: "SQLITE_CANTOPEN_ISDIR",
	CodeCantOpen | 3<<8: "SQLITE_CANTOPEN_FULLPATH", CodeCantOpen | 4<<8: "SQLITE_CANTOPEN_CONVPATH",
	CodeCantOpen | 5<<8: "SQLITE_CANTOPEN_DIRTYWAL", CodeCantOpen | 6<<8: "SQLITE_CANTOPEN_SYMLINK",

	CodeCorrupt | 1<<8: "SQLITE_CORRUPT_VTAB", CodeCorrupt | 2<<8: "SQLITE_CORRUPT_SEQUENCE", CodeCorrupt | 3<<8: "SQLITE_CORRUPT_INDEX",

	CodeReadOnly | 1<<8: "SQLITE_READONLY_RECOVERY", CodeReadOnly | 2<<8: "SQLITE_READONLY_CANTLOCK",
	CodeReadOnly | 3<<8: "SQLITE_READONLY_ROLLBACK", CodeReadOnly | 4<<8: "SQLITE_READONLY_DBMOVED",
	CodeReadOnly | 5<<8: "SQLITE_READONLY_CANTINIT", CodeReadOnly | 6<<8: "SQLITE_READONLY_DIRECTORY",

	CodeAbort | 2<<8: "SQLITE_ABORT_ROLLBACK",

	CodeConstraint | 1<<8: "SQLITE_CONSTRAINT_CHECK", CodeConstraint | 2<<8: "SQLITE_CONSTRAINT_COMMITHOOK",
	CodeConstraint | 3<<8: "SQLITE_CONSTRAINT_FOREIGNKEY", CodeConstraint | 4<<8: "SQLITE_CONSTRAINT_FUNCTION",
	CodeConstraint | 5<<8: "SQLITE_CONSTRAINT_NOTNULL", CodeConstraint | 6<<8: "SQLITE_CONSTRAINT_PRIMARYKEY",
	CodeConstraint | 7<<8: "SQLITE_CONSTRAINT_TRIGGER", CodeConstraint | 8<<8: "SQLITE_CONSTRAINT_UNIQUE",
	CodeConstraint | 9<<8: "SQLITE_CONSTRAINT_VTAB", CodeConstraint | 10<<8: "SQLITE_CONSTRAINT_ROWID",
	CodeConstraint | 11<<8: "SQLITE_CONSTRAINT_PINNED", CodeConstraint | 12<<8: "SQLITE_CONSTRAINT_DATATYPE",

	27 | 1<<8: "SQLITE_NOTICE_RECOVER_WAL", 27 | 2<<8: "SQLITE_NOTICE_RECOVER_ROLLBACK", 27 | 3<<8: "SQLITE_NOTICE_RBU",
	28 | 1<<8:     "SQLITE_WARNING_AUTOINDEX",
	23 | 1<<8:     "SQLITE_AUTH_USER",
	CodeOK | 1<<8: "SQLITE_OK_LOAD_PERMANENTLY", CodeOK | 2<<8: "SQLITE_OK_SYMLINK",
}

// CodeOK is SQLITE_OK; it never appears in an Error, only in the name table.
const CodeOK Code = 0

var codesByName = func() map[string]Code {
	m := make(map[string]Code, len(codeNames))
	for c, n := range codeNames {
		m[n] = c
	}
	return m
}()

// Name is SQLite's name of the code (SQLITE_IOERR_WRITE), or "SQLITE code
// N" for a number SQLite does not define.
func (c Code) Name() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("SQLITE code %d", int(c))
}

// CodeFromName returns the code SQLite names name (SQLITE_FULL,
// SQLITE_IOERR_WRITE, …).
func CodeFromName(name string) (Code, bool) {
	c, ok := codesByName[name]
	return c, ok
}

// CodeFromText finds the first SQLite code name in a platform's error text
// ("SQLITE_FULL: database or disk is full", "Error: … SQLITE_BUSY") and
// returns its code. Only a host whose platform reports failures as text
// (the Durable Object bridge) may use it, and only to build an *Error at
// once: everything else classifies by code, never by message. The longest
// name wins at a position, so SQLITE_IOERR_WRITE is not read as
// SQLITE_IOERR.
func CodeFromText(text string) (Code, bool) {
	for i := 0; ; {
		j := strings.Index(text[i:], "SQLITE_")
		if j < 0 {
			return 0, false
		}
		start := i + j
		end := start + len("SQLITE_")
		for end < len(text) && (text[end] == '_' || 'A' <= text[end] && text[end] <= 'Z' || '0' <= text[end] && text[end] <= '9') {
			end++
		}
		// Trim trailing characters until a known name remains: a name may be
		// followed directly by more capitals in odd platform text.
		for k := end; k > start+len("SQLITE_"); k-- {
			if c, ok := codesByName[text[start:k]]; ok && c.Primary() != CodeOK {
				return c, true
			}
		}
		i = end
	}
}

// descriptions are the human words for the primary codes a storage failure
// message can name.
var descriptions = map[Code]string{
	CodeFull:     "the database or disk is full",
	CodeBusy:     "the database is locked by another connection",
	CodeLocked:   "a table is locked",
	CodeIOErr:    "a disk I/O error occurred",
	CodeReadOnly: "the database is read-only",
	CodeCorrupt:  "the database file is damaged",
	CodeCantOpen: "the database file cannot be opened",
}

// Describe says in words what storage failure err is, for a message a user
// reads ("the database or disk is full (SQLITE_FULL)"). An error with no
// SQLite code is described by its own text.
func Describe(err error) string {
	c := CodeOf(err)
	if c == 0 {
		return err.Error()
	}
	if d, ok := descriptions[c.Primary()]; ok {
		return d + " (" + c.Name() + ")"
	}
	return "the database failed (" + c.Name() + ")"
}
