package abi

// SQLError codes that are no SQLite result code (docs/abi.md, SQL results).
// Every other code is the extended SQLite result code.
const (
	// SQLCodeNone is an error without an SQLite code: the guest keeps only
	// its message.
	SQLCodeNone int64 = 0
	// SQLCodeClosed is "database closed" (storage.ErrClosed on either side).
	SQLCodeClosed int64 = -1
)
