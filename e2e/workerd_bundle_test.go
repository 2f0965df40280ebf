package e2e

import (
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// paidPlanLimit is the Workers script size limit after compression on the
// paid plan; freePlanLimit the free plan's (the lean-guest issue's goal).
const (
	paidPlanLimit = 10 << 20
	freePlanLimit = 3 << 20
)

// bundleCeiling holds the bundle's size where it is: the total gzip -9 of
// the dry run's files measured once the Worker linked no log/slog (core/logs'
// lite logger on js), 1,817,661 bytes, plus 32 KiB: room for a round of
// fixes, not for a new standard package. Lower it when a cut lands; raise
// it only with a reason in the commit. Session 59 raised it by 16 KiB:
// eleven sessions of fixes had used the room (1,851,274 bytes, 845 over),
// the last a request's context planning and the front's directory errors.
// Session 64 compiled the Worker's revenant packages (but durableobject) and
// fmt without inlining (Makefile, do-build): 1,864,533 bytes, 2,280 under the
// ceiling, became 1,773,464, then with internal/fmtsort, net/url and time
// built so too 1,762,193. The ceiling is that plus 32 KiB, as it was first
// set: 71 KB under where it stood, and room for a round of fixes (the
// session's own fixes had taken the 2,280 bytes down to 1,176).
const bundleCeiling = 1_762_193 + 32<<10

// TestWranglerDryRunBundle bundles the Worker as `wrangler deploy` would,
// without an account (`--dry-run --outdir`), and holds the bundle under
// its ceiling (and the plans' compressed limits). It logs every file's
// raw and gzip -9 size, so the figures are in every CI log.
func TestWranglerDryRunBundle(t *testing.T) {
	t.Parallel() // see workerd_test.go
	root := requireWrangler(t)
	main := buildObject(t, root, "")
	out := t.TempDir()
	cmd := exec.Command(wranglerBin(root), "deploy", "--dry-run", "--outdir", out, "-c", testConfig(t, root, main))
	cmd.Dir = root
	cmd.Env = wranglerEnv(t.TempDir())
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "wrangler deploy --dry-run: %s", b)
	require.Contains(t, string(b), "--dry-run: exiting now.", "wrangler bundled without deploying")

	var total int64
	wasm := 0
	require.NoError(t, filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".map") {
			return err // source maps are not uploaded as the script
		}
		raw, gz := sizes(t, path)
		total += gz
		if strings.HasSuffix(path, ".wasm") {
			wasm++
		}
		rel, _ := filepath.Rel(out, path)
		t.Logf("bundle: %-40s raw %9d  gzip -9 %9d", rel, raw, gz)
		return nil
	}))
	t.Logf("bundle: total gzip -9 %d bytes (%.2f MiB); ceiling %d; free plan %d, paid plan %d",
		total, float64(total)/(1<<20), bundleCeiling, freePlanLimit, paidPlanLimit)
	require.Equal(t, 1, wasm, "one wasm module serves the front and the objects (cmd/worker)")
	require.Less(t, total, int64(paidPlanLimit), "the bundle fits the paid plan")
	require.Less(t, total, int64(freePlanLimit), "the bundle fits the free plan")
	require.LessOrEqual(t, total, int64(bundleCeiling), "the bundle grew past its ceiling")
}

// sizes returns a file's size and its size after gzip at level 9.
func sizes(t *testing.T, path string) (raw, gz int64) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var n countWriter
	zw, err := gzip.NewWriterLevel(&n, gzip.BestCompression)
	require.NoError(t, err)
	raw, err = io.Copy(zw, f)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return raw, int64(n)
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }
