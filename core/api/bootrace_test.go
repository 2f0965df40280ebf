package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/internal/treetest"
)

// racedTrees is memTrees whose Get answers, when race is set, as a host
// may between the owner check and the boot.
type racedTrees struct {
	*memTrees
	race func(inst *core.Instance, info api.TreeInfo) (*core.Instance, api.TreeInfo)
}

func (r *racedTrees) Get(ctx context.Context, rootID string) (*core.Instance, api.TreeInfo, error) {
	inst, info, err := r.memTrees.Get(ctx, rootID)
	if err == nil && r.race != nil {
		inst, info = r.race(inst, info)
	}
	return inst, info, err
}

func racedHandler(t *testing.T) (*racedTrees, func(method, path string) *httptest.ResponseRecorder) {
	trees := &racedTrees{memTrees: newMemTrees(t, treetest.NewDriver(4))}
	h, err := api.New(api.Deps{Trees: trees, Auth: api.Anonymous{}, Clock: fakehost.NewClock(treetest.Start), IDs: &fakehost.IDs{Prefix: "root"}}, api.NewConfig())
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return trees, func(method, path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		nethttp.Handler(h).ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader("")))
		return w
	}
}

// An instance that stopped between the owner check and the boot (idle
// eviction) is not served from: the handler asks for the tree's next one.
func TestBootAsksAgainForAStoppedInstance(t *testing.T) {
	trees, do := racedHandler(t)
	created := do("POST", "/v1/sessions")
	require.Equal(t, http.StatusCreated, created.Code)
	id := strings.Split(created.Body.String(), `"`)[3]

	stopped := treetest.New(t).Boot(treetest.NewDriver(1))
	require.NoError(t, stopped.Inst.Close(context.Background()))
	handed := 0
	trees.race = func(inst *core.Instance, info api.TreeInfo) (*core.Instance, api.TreeInfo) {
		if handed++; handed == 1 {
			return stopped.Inst, info
		}
		return inst, info
	}
	w := do("GET", "/v1/sessions/"+id)
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, 2, handed, "asked once more")
}

// A tree deleted and taken by another principal between the owner check
// and the boot is not served to the first: 404, as a tree it never owned.
func TestBootRefusesATreeThatChangedHands(t *testing.T) {
	trees, do := racedHandler(t)
	created := do("POST", "/v1/sessions")
	require.Equal(t, http.StatusCreated, created.Code)
	id := strings.Split(created.Body.String(), `"`)[3]

	trees.race = func(inst *core.Instance, info api.TreeInfo) (*core.Instance, api.TreeInfo) {
		info.Principal = "mallory"
		return inst, info
	}
	for _, rq := range []struct{ method, path string }{{"GET", "/v1/sessions/" + id}, {"POST", "/v1/sessions/" + id + "/interrupt"}} {
		w := do(rq.method, rq.path)
		assert.Equal(t, http.StatusNotFound, w.Code, "%s %s: %s", rq.method, rq.path, w.Body)
	}
}
