package serve

import "github.com/revenantrt/revenant/wasm/runtime"

// SetRequest replaces how the tree delivers requests to its guest (nil:
// Guest.Request).
func SetRequest(t *Tree, f func(g *runtime.Guest, id uint64, req runtime.Request) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.request = f
}

// Generation is how many guests the tree has booted.
func Generation(t *Tree) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gen
}

// Requests is how many requests the tree tracks.
func Requests(t *Tree) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.reqs)
}

// Guest is the tree's current guest.
func Guest(t *Tree) *runtime.Guest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.g
}
