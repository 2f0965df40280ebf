package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
)

// Store is the tree's key-value store as an in-tree tool reads it, inside
// the transaction that settles the call.
type Store interface {
	Get(key string) (value string, found bool, err error)
}

// InTree is implemented by tools whose whole effect lives in the tree's own
// database. The runner calls RunInTree inside the transaction that settles
// the call and records puts in the settlement, so the effect commits with
// it: exactly once, with no `executing` phase and nothing to re-run after a
// crash. RunInTree may run more than once if that transaction is retried,
// so it must not act outside the store.
type InTree interface {
	Tool
	RunInTree(store Store, call Call) (output string, puts []event.KVPut, err error)
}

// errInTree is what Execute of an in-tree tool returns: the runner never
// calls it, and anything else must not either.
var errInTree = errors.New("tool runs inside the tree's transaction; call RunInTree")

// Limits on the kv store.
const (
	MaxKVKey   = 256
	MaxKVValue = 64 << 10
)

type kvGet struct{}
type kvPut struct{}

// KVGet is the kv_get tool: read a value of the tree's key-value store.
func KVGet() InTree { return kvGet{} }

// KVPut is the kv_put tool: write a value of the tree's key-value store.
func KVPut() InTree { return kvPut{} }

func (kvGet) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "kv_get", Description: "Read the value stored under a key in this session tree's key-value store.",
		Schema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"],"additionalProperties":false}`)}
}
func (kvPut) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "kv_put", Description: "Store a value under a key in this session tree's key-value store, replacing any previous value.",
		Schema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"},"value":{"type":"string"}},"required":["key","value"],"additionalProperties":false}`)}
}

// Both are idempotent: their effect is applied with the settlement, once.
func (kvGet) Idempotent() bool { return true }
func (kvPut) Idempotent() bool { return true }

func (kvGet) Resources(args json.RawMessage) ([]string, error) { return kvResources(args) }
func (kvPut) Resources(args json.RawMessage) ([]string, error) { return kvResources(args) }

func (kvGet) Limits() Limits { return Limits{} }
func (kvPut) Limits() Limits { return Limits{} }

func (kvGet) Execute(context.Context, Call) (string, error) { return "", errInTree }
func (kvPut) Execute(context.Context, Call) (string, error) { return "", errInTree }

type kvArgs struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

func parseKV(args json.RawMessage, needValue bool) (kvArgs, error) {
	var a kvArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return a, fmt.Errorf("arguments must be a JSON object with a string key: %v", err)
	}
	switch {
	case a.Key == "":
		return a, errors.New("key must not be empty")
	case len(a.Key) > MaxKVKey:
		return a, fmt.Errorf("key is longer than %d bytes", MaxKVKey)
	case needValue && a.Value == nil:
		return a, errors.New("value is required")
	case needValue && len(*a.Value) > MaxKVValue:
		return a, fmt.Errorf("value is longer than %d bytes", MaxKVValue)
	}
	return a, nil
}

func kvResources(args json.RawMessage) ([]string, error) {
	a, err := parseKV(args, false)
	if err != nil {
		return nil, err
	}
	return []string{"kv:" + a.Key}, nil
}

func (kvGet) RunInTree(store Store, call Call) (string, []event.KVPut, error) {
	a, err := parseKV(call.Arguments, false)
	if err != nil {
		return "", nil, err
	}
	v, found, err := store.Get(a.Key)
	if err != nil {
		return "", nil, err
	}
	if !found {
		return "", nil, fmt.Errorf("no value is stored under %q", a.Key)
	}
	return v, nil, nil
}

func (kvPut) RunInTree(_ Store, call Call) (string, []event.KVPut, error) {
	a, err := parseKV(call.Arguments, true)
	if err != nil {
		return "", nil, err
	}
	return "stored " + a.Key, []event.KVPut{{Key: a.Key, Value: *a.Value}}, nil
}
