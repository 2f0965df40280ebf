package core

import (
	"context"

	"github.com/revenantrt/revenant/core/storage"
)

// MessagePage is the snapshot's page of messages with a byte budget of
// the test's (the snapshot's is MessagePageBytes).
func (inst *Instance) MessagePage(ctx context.Context, sessionID string, before int64, limit, maxBytes int) (ms []Message, more bool, err error) {
	err = inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		ms, more, err = readMessages(tx, sessionID, before, limit, maxBytes)
		return err
	})
	return ms, more, err
}
