package core_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The import rules (core reaches no host or platform package) are the
// architecture test's, internal/archtest; this file reads core's source.

// clockCalls are the package time functions that read or wait on the real
// clock. Core takes time, timers and sleeps from the host's Clock (DESIGN
// §4, §16), so the simulator owns time.
var clockCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true,
	"After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

// forbiddenImports are packages core must not use at all: randomness comes
// from the host (IDSource) so that histories repeat.
var forbiddenImports = map[string]bool{"math/rand": true, "math/rand/v2": true}

// TestNoDirectClockOrRandomness parses every non-test Go file under core/
// and recovery/ (fakehost included) and fails on a use of time.Now,
// time.Sleep and the other real-clock functions, or an import of math/rand.
// It reads the syntax tree rather than the text, so comments that name
// these functions (as the package docs do) are not hits, and renamed
// imports are still caught.
func TestNoDirectClockOrRandomness(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	for _, dir := range []string{".", "../recovery"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); path != dir && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			timeNames := map[string]bool{}
			for _, imp := range f.Imports {
				p, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					return err
				}
				if forbiddenImports[p] {
					t.Errorf("%s: imports %s", fset.Position(imp.Pos()), p)
				}
				if p == "time" {
					name := "time"
					if imp.Name != nil {
						name = imp.Name.Name
					}
					if name == "." {
						t.Errorf("%s: dot-imports time", fset.Position(imp.Pos()))
					}
					timeNames[name] = true
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && timeNames[x.Name] && clockCalls[sel.Sel.Name] {
					t.Errorf("%s: uses time.%s; take it from the host's Clock", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotZero(t, files, "no Go files found")
}
