package storage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
)

// vectorNode is one error of testdata/classification.json.
type vectorNode struct {
	Code      string       `json:"code"`
	Text      *string      `json:"text"`
	Detail    *vectorNode  `json:"detail"`
	Wrap      *vectorNode  `json:"wrap"`
	Join      []vectorNode `json:"join"`
	Plain     *string      `json:"plain"`
	Cancelled bool         `json:"cancelled"`
	Deadline  bool         `json:"deadline"`
}

// build makes the Go error a node describes, as a host would report it.
func (n vectorNode) build(t *testing.T) error {
	t.Helper()
	switch {
	case n.Code != "":
		c, ok := storage.CodeFromName(n.Code)
		require.True(t, ok, "unknown code name %s", n.Code)
		e := &storage.Error{Code: c, Msg: n.Code}
		if n.Detail != nil {
			e.Err = n.Detail.build(t)
		}
		return e
	case n.Text != nil:
		// What the Durable Object bridge does with platform text.
		if c, ok := storage.CodeFromText(*n.Text); ok {
			return &storage.Error{Code: c, Msg: *n.Text}
		}
		return errors.New(*n.Text)
	case n.Wrap != nil:
		return fmt.Errorf("tx: %w", n.Wrap.build(t))
	case n.Join != nil:
		var errs []error
		for _, c := range n.Join {
			errs = append(errs, c.build(t))
		}
		return errors.Join(errs...)
	case n.Plain != nil:
		return errors.New(*n.Plain)
	case n.Cancelled:
		return context.Canceled
	case n.Deadline:
		return context.DeadlineExceeded
	}
	t.Fatalf("empty vector node")
	return nil
}

// TestClassificationVectors runs the shared table every host must agree
// with (the Durable Object bridge runs the same file).
func TestClassificationVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/classification.json")
	require.NoError(t, err)
	var file struct {
		About string `json:"about"`
		Cases []struct {
			Name      string     `json:"name"`
			Error     vectorNode `json:"error"`
			Transient bool       `json:"transient"`
			Code      int        `json:"code"`
		} `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&file))
	require.NotEmpty(t, file.Cases)
	seen := map[string]bool{}
	for _, tc := range file.Cases {
		require.False(t, seen[tc.Name], "duplicate case %q", tc.Name)
		seen[tc.Name] = true
		t.Run(tc.Name, func(t *testing.T) {
			err := tc.Error.build(t)
			assert.Equal(t, tc.Transient, storage.IsTransient(err), "IsTransient(%v)", err)
			assert.Equal(t, storage.Code(tc.Code), storage.CodeOf(err), "CodeOf(%v)", err)
		})
	}
}

func TestCodeNames(t *testing.T) {
	for name, code := range map[string]storage.Code{
		"SQLITE_FULL":             storage.CodeFull,
		"SQLITE_BUSY":             storage.CodeBusy,
		"SQLITE_IOERR_WRITE":      storage.CodeIOErr | 3<<8,
		"SQLITE_CONSTRAINT_CHECK": storage.CodeConstraint | 1<<8,
	} {
		got, ok := storage.CodeFromName(name)
		assert.True(t, ok, name)
		assert.Equal(t, code, got, name)
		assert.Equal(t, name, code.Name())
	}
	_, ok := storage.CodeFromName("SQLITE_NOPE")
	assert.False(t, ok)
	assert.Equal(t, "SQLITE code 999", storage.Code(999).Name())
	_, ok = storage.CodeFromText("SQLITE_OK")
	assert.False(t, ok, "success is never a failure's code")
	for _, text := range []string{"SQLITE_OK_SYMLINK", "Error: SQLITE_OK_LOAD_PERMANENTLY"} {
		_, ok = storage.CodeFromText(text)
		assert.False(t, ok, "an extended success code is no failure's code either: %s", text)
	}
}

func TestDescribe(t *testing.T) {
	assert.Equal(t, "the database or disk is full (SQLITE_FULL)", storage.Describe(fmt.Errorf("commit: %w", &storage.Error{Code: storage.CodeFull})))
	assert.Equal(t, "a disk I/O error occurred (SQLITE_IOERR_FSYNC)", storage.Describe(&storage.Error{Code: storage.CodeIOErr | 4<<8}))
	assert.Equal(t, "the database failed (SQLITE_TOOBIG)", storage.Describe(&storage.Error{Code: 18}))
	assert.Equal(t, "boom", storage.Describe(errors.New("boom")))
}
