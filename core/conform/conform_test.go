package conform_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/conform"
)

func TestRecorder(t *testing.T) {
	var order []string
	r := conform.Record("suite", func(t conform.T) {
		t.Cleanup(func() { order = append(order, "root cleanup") })
		t.Run("passes", func(t conform.T) { t.Logf("fine") })
		t.Run("errors", func(t conform.T) {
			t.Errorf("first %d", 1)
			t.Errorf("second")
			order = append(order, "after Errorf")
		})
		t.Run("fails now", func(t conform.T) {
			t.Cleanup(func() { order = append(order, "child cleanup") })
			t.FailNow()
			order = append(order, "after FailNow")
		})
		t.Run("group", func(t conform.T) {
			t.Run("skips", func(t conform.T) {
				t.Skip("no capability")
				order = append(order, "after Skip")
			})
		})
	})
	assert.True(t, r.Failed())
	assert.Equal(t, []string{"suite/errors", "suite/fails now"}, r.Failures(), "only the tests whose own checks failed")
	assert.Equal(t, []string{"suite/group/skips"}, r.Skipped())
	assert.Equal(t, []string{"first 1", "second"}, r.Find("suite/errors").Logs())
	assert.False(t, r.Find("suite/passes").Failed())
	assert.False(t, r.Find("suite/group").Failed(), "a skip is no failure")
	assert.Nil(t, r.Find("suite/none"))
	assert.Equal(t, []string{"after Errorf", "child cleanup", "root cleanup"}, order,
		"Errorf goes on, FailNow and Skip end the test, cleanups run")
}

func TestWrap(t *testing.T) {
	ran := false
	conform.Wrap(t).Run("child", func(c conform.T) {
		ran = true
		assert.Equal(t, t.Name()+"/child", c.Name())
	})
	assert.True(t, ran)
}
