package sim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No two of the simulator's generators share a key (streams.go): they
// would draw the same numbers for a tree, and what they decide would go
// together. Read from the source: every key* constant has a value of its
// own, and each is drawn from at one place only.
func TestStreamKeysAreDistinct(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	keys := map[uint64]string{}         // value: name
	keyLits := map[*ast.BasicLit]bool{} // the key constants' values
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "key") || i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				require.True(t, ok, "%s is a literal", name.Name)
				keyLits[lit] = true
				v, err := strconv.ParseUint(lit.Value, 0, 64)
				require.NoError(t, err)
				if other, ok := keys[v]; ok {
					t.Errorf("generators %s and %s share the key %#x", name.Name, other, v)
				}
				keys[v] = name.Name
			}
			return false
		})
	}
	require.NotEmpty(t, keys, "no stream keys found")
	// A generator keyed by a literal of its own, not by a key constant,
	// would escape the checks above (the shared key was such a literal).
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.INT && !keyLits[lit] && strings.HasPrefix(lit.Value, "0x") && len(lit.Value) > 10 {
				t.Errorf("%s: the 64-bit literal %s is no key constant: key generators in streams.go", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
	}
	uses := map[string]int{} // the declaration and every use
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				uses[id.Name]++
			}
			return true
		})
	}
	for _, name := range keys {
		assert.Equal(t, 2, uses[name], "key %s is declared and drawn from at one place", name)
	}
}
