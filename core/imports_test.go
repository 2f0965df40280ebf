package core_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/revenantrt/revenant"

// forbiddenPrefixes may not appear anywhere among the dependencies of core
// and recovery: they are host packages (DESIGN §3, STYLE practice 1).
var forbiddenPrefixes = []string{
	"github.com/tetratelabs/wazero",
	"github.com/ncruces",
	"github.com/syumai",
}

func forbidden(path string) bool {
	for _, p := range forbiddenPrefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// TestNoHostImports fails if core or recovery depend, for any target they
// build for, on a host package. syscall/js is judged by who imports it: on
// js/wasm the standard library itself reaches it (package syscall is built
// on it there), so the rule is that no package outside the standard library
// imports it. Test files are not part of `go list -deps` without -test, so
// the tests' own use of host/sqlitedb (through internal/treetest) is fine.
func TestNoHostImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list three times")
	}
	for _, target := range []struct{ goos, goarch string }{
		{"", ""}, // the default target
		{"js", "wasm"},
		{"wasip1", "wasm"},
	} {
		name := target.goos + "/" + target.goarch
		if target.goos == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps",
				"-f", `{{.ImportPath}} {{.Standard}} {{join .Imports " "}}`,
				module+"/core/...", module+"/recovery/...")
			cmd.Env = os.Environ()
			if target.goos != "" {
				cmd.Env = append(cmd.Env, "GOOS="+target.goos, "GOARCH="+target.goarch, "CGO_ENABLED=0")
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "go list: %s", stderr.String())

			imports := map[string][]string{} // package → what it imports
			standard := map[string]bool{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				fields := strings.Fields(sc.Text())
				require.GreaterOrEqual(t, len(fields), 2, "unexpected go list line %q", sc.Text())
				imports[fields[0]] = fields[2:]
				standard[fields[0]] = fields[1] == "true"
			}
			require.NoError(t, sc.Err())
			for pkg, imps := range imports {
				if forbidden(pkg) {
					continue // report where the graph enters a host package, not its insides
				}
				for _, imp := range imps {
					switch {
					case forbidden(imp):
						t.Errorf("%s imports %s", pkg, imp)
					case imp == "syscall/js" && !standard[pkg]:
						t.Errorf("%s imports syscall/js", pkg)
					}
				}
			}
			require.NotEmpty(t, imports, "go list printed nothing")
		})
	}
}

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
