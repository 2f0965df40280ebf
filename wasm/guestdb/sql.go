package guestdb

import (
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// SQL is the five SQL imports of docs/abi.md. Each call returns the
// import's result as the guest takes it: empty for success with nothing to
// take, otherwise abi.ResultOK and its payload, or abi.ResultError and an
// encoded abi.SQLError. A statement is an encoded abi.Statement. In the
// guest the calls are the wasm imports; natively, the runtime's import
// bodies over a host connection. A result is valid until the next call
// (the guest reuses its buffer): DB reads each before making another.
type SQL interface {
	Begin() []byte
	Exec(stmt []byte) []byte
	Query(stmt []byte) []byte
	Commit() []byte
	Rollback() []byte
}

// payload reads an SQL import's result: the OK payload, or the host's
// error as a *storage.Error with its extended code, so core classifies it
// by code.
func payload(res []byte) ([]byte, error) {
	if len(res) == 0 {
		return nil, nil
	}
	switch res[0] {
	case abi.ResultOK:
		return res[1:], nil
	case abi.ResultError:
		se, err := abi.DecodeSQLError(res[1:])
		if err != nil {
			return nil, err
		}
		switch se.Code {
		case abi.SQLCodeClosed:
			return nil, fmt.Errorf("%s: %w", se.Message, storage.ErrClosed)
		case abi.SQLCodeNone:
			return nil, errors.New(se.Message)
		}
		return nil, &storage.Error{Code: storage.Code(se.Code), Msg: se.Message}
	}
	return nil, fmt.Errorf("sql result tag %d: %w", res[0], abi.ErrMalformed)
}

// status reads the result of an import without an OK payload.
func status(res []byte) error {
	_, err := payload(res)
	return err
}

// tx is storage.Tx over the imports: each statement crosses in its wire
// form and its answer comes back decoded, its column names interned in the
// DB's names (its mutex held).
type tx struct {
	sql   SQL
	names *abi.Names
}

func (t tx) Exec(query string, args ...any) (int64, error) {
	b, err := abi.Statement{Query: query, Args: args}.Encode()
	if err != nil {
		return 0, err
	}
	res, err := payload(t.sql.Exec(b))
	if err != nil {
		return 0, err
	}
	dec := abi.NewDecoder(res)
	changed := dec.Varint()
	return changed, dec.Finish()
}

func (t tx) Query(query string, args ...any) (*storage.Rows, error) {
	b, err := abi.Statement{Query: query, Args: args}.Encode()
	if err != nil {
		return nil, err
	}
	res, err := payload(t.sql.Query(b))
	if err != nil {
		return nil, err
	}
	rows, err := abi.DecodeRowsNames(res, t.names)
	if err != nil {
		return nil, err
	}
	return &storage.Rows{Columns: rows.Columns, Values: rows.Values}, nil
}
