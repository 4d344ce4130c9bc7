package connbench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/tabfence/tabfence/internal/wasmpack"
)

// download is one build of tabfence.wasm as users download it: raw bytes,
// and brotli at quality 11 (0 when the brotli CLI is not on PATH).
type download struct{ raw, brotli int }

// downloads builds the runtime twice as `make build` builds
// dist/tabfence.wasm (the Makefile's flags, then wasmpack with
// -strip-lines): as it ships, and with -tags tabfence_noconnection, the
// build without tf.connection. The difference is what the connection adds
// to every user's download.
func downloads(ctx context.Context, gcflags []string) (full, without download, err error) {
	dir, err := os.MkdirTemp("", "tabfence-connsize-")
	if err != nil {
		return download{}, download{}, err
	}
	defer os.RemoveAll(dir)
	if full, err = buildRuntime(ctx, gcflags, "", filepath.Join(dir, "full.wasm")); err != nil {
		return download{}, download{}, err
	}
	without, err = buildRuntime(ctx, gcflags, "tabfence_noconnection", filepath.Join(dir, "noconn.wasm"))
	return full, without, err
}

func buildRuntime(ctx context.Context, gcflags []string, tags, out string) (download, error) {
	args := []string{"build", "-trimpath", "-ldflags=-s -w"}
	args = append(args, gcflags...)
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", out, "./wasm")...)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return download{}, errors.New("go build " + tags + ": " + err.Error() + ": " + string(msg))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return download{}, err
	}
	if b, err = wasmpack.Pack(b); err != nil {
		return download{}, err
	}
	if b, _, err = wasmpack.StripLines(b); err != nil {
		return download{}, err
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return download{}, err
	}
	d := download{raw: len(b)}
	if bin, err := exec.LookPath("brotli"); err == nil {
		c, err := exec.CommandContext(ctx, bin, "-c", "-q", "11", out).Output()
		if err != nil {
			return download{}, err
		}
		d.brotli = len(c)
	}
	return d, nil
}
