package model_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/model"
)

func TestErrorNamesItsStatus(t *testing.T) {
	assert.Equal(t, "model error 429: slow down", (&model.Error{Status: 429, Retryable: true, Msg: "slow down"}).Error())
	assert.Equal(t, "model error: cut", (&model.Error{Msg: "cut"}).Error())
}

func TestIsRetryableLooksThroughWrapping(t *testing.T) {
	assert.True(t, model.IsRetryable(fmt.Errorf("turn: %w", &model.Error{Retryable: true})))
	assert.False(t, model.IsRetryable(fmt.Errorf("turn: %w", &model.Error{})))
	assert.False(t, model.IsRetryable(errors.New("plain")))
}
