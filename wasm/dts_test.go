//go:build !(js && wasm)

package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/outbox/browser"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wasm/connection"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// The string unions of jsglue/loader/tabfence.d.ts list exactly what the
// Go tables behind the API hold: a name in Go that the d.ts lacks, or one
// the d.ts promises that no Go table has, fails here.
func TestDTSMatchesGo(t *testing.T) {
	src, err := os.ReadFile("../jsglue/loader/tabfence.d.ts")
	require.NoError(t, err)
	dts := string(src)
	var dedupes, drops []string
	for _, d := range queue.DedupePolicies() {
		dedupes = append(dedupes, string(d))
	}
	for _, r := range channel.Reasons() {
		drops = append(drops, r.String())
	}
	require.ElementsMatch(t, goConsts(t, "../outbox/queue", "Dedupe"), dedupes, "the API offers every dedupe policy")
	ops := []string{}
	for _, w := range jsapi.WriteOps {
		ops = append(ops, w.Name)
	}
	for _, c := range []struct {
		anchor string // the text the union follows in the d.ts
		want   []string
		prop   string // the property after anchor that has the union, if any
	}{
		{"export type Dedupe =", dedupes, ""},
		{"export type LostReason =", lostReasons(), ""},
		{"export type DropReason =", drops, ""},
		{"export type ApplyResult =", applyResults(), ""},
		{"export type OutboxFailure =", goConsts(t, "../outbox/queue", "FailureKind"), ""},
		{"export interface Write {\n", ops, " op:"},
		{"export interface OutboxEvent {\n", goConsts(t, "../outbox", "EventKind"), " kind:"},
		{"  enqueue(op: OutboxOp<Ops>)", goConsts(t, "../outbox/queue", "Action"), " action:"},
		{"export type RecordStatus =", goConsts(t, "../outbox/queue", "Status"), ""},
		{"export type ConnectionState =", goConsts(t, "../realtime/browser", "State"), ""},
		{"export type ConnectionClosed =", closedReasons(t), ""},
		{"export type SyncReason =", browser.SyncReasons, ""},
	} {
		require.ElementsMatch(t, c.want, union(t, dts, c.anchor, c.prop), "the d.ts's union after %q%s", c.anchor, c.prop)
	}

	require.Contains(t, dts, "  status: RecordStatus;", "OutboxRecordInfo.status is the union of the statuses")
	require.Contains(t, dts, "  state: ConnectionState;", "ConnectionStatus.state is the union of the states")
	require.Contains(t, dts, "  closed: ConnectionClosed | null;", "ConnectionStatus.closed is the union, null while open")
	require.Contains(t, dts, "  reason: SyncReason;", "SyncReport.reason is the union")

	// OutboxErrorCode is every code the outbox writes into an ErrorInfo;
	// an HTTP status's code is the template http_<status>.
	codes, httpCodes := errorCodes(t, "../outbox")
	queueCodes, queueHTTP := errorCodes(t, "../outbox/queue")
	codes, httpCodes = append(codes, queueCodes...), httpCodes || queueHTTP
	slices.Sort(codes)
	codes = slices.Compact(codes)
	require.True(t, httpCodes, "the outbox names HTTP answers http_<status>")
	require.ElementsMatch(t, codes, union(t, dts, "export type OutboxErrorCode =", ""), "OutboxErrorCode against the outbox's codes")
	require.Contains(t, dts, "  | `http_${number}`\n", "OutboxErrorCode has the http_<status> template")
	require.Contains(t, dts, "  code: OutboxErrorCode;", "OutboxError.code is the union")

	// TabfenceErrorName is every name an error of the API can carry: the
	// API's own, the browser's that jsglue passes through, the loader's,
	// and a plain Error; nothing else (no escape hatch to string).
	names := append(ownErrorNames(), jsglue.Names()...)
	names = append(names, "Error")
	for _, m := range regexp.MustCompile(`export class (\w+) extends Error`).FindAllStringSubmatch(dts, -1) {
		names = append(names, m[1]) // the loader's
	}
	slices.Sort(names)
	require.ElementsMatch(t, slices.Compact(names), union(t, dts, "export type TabfenceErrorName =", ""), "TabfenceErrorName against the Go tables")
	require.Contains(t, dts, "  name: TabfenceErrorName;\n", "TabfenceError.name is the union, not any string")
}

// ownErrorNames are the names of the errors the API makes itself.
func ownErrorNames() []string {
	out := []string{(&jsapi.TypeError{}).JSName(), (&StaleError{}).JSName(), (&NotLeaderError{}).JSName(),
		nameDatabaseDeleted, nameDatabaseUpgraded, nameStorageClosed, nameAbort, (&locks.LostError{}).JSName()}
	// The locks errors an election hands out (a signal's reason, a rejection).
	for _, e := range []*locks.Error{locks.ErrUnavailable, locks.ErrStolen, locks.ErrClosed, locks.ErrResigned, locks.ErrFenced} {
		out = append(out, e.JSName())
	}
	for _, m := range outboxErrorNames {
		out = append(out, m.name)
	}
	return append(out, connection.ErrorNames()...)
}

// closedReasons are realtime/browser's Closed values but ClosedNot (""),
// which the d.ts spells null.
func closedReasons(t *testing.T) []string {
	var out []string
	for _, c := range goConsts(t, "../realtime/browser", "Closed") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

func lostReasons() []string {
	var out []string
	for r := locks.Reason(0); !strings.HasPrefix(r.String(), "Reason("); r++ {
		out = append(out, r.String())
	}
	for _, r := range storageLostReasons {
		out = append(out, r.reason)
	}
	return out
}

func applyResults() []string {
	var out []string
	for r := idb.Result(1); r.String() != "invalid"; r++ {
		out = append(out, r.String())
	}
	return out
}

// errorCodes are the error codes the Go package in dir writes: its Code*
// string constants and the literal Code fields of its ErrorInfo values;
// httpCodes says whether a Code field is built as "http_" + a status.
func errorCodes(t *testing.T, dir string) (codes []string, httpCodes bool) {
	t.Helper()
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		require.NoError(t, err)
		return s, true
	}
	for _, file := range parseDir(t, dir) {
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if s, ok := "", false; strings.HasPrefix(name.Name, "Code") && i < len(n.Values) {
						if s, ok = str(n.Values[i]); ok && !slices.Contains(codes, s) {
							codes = append(codes, s)
						}
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); !ok || k.Name != "Code" {
					return true
				}
				if s, ok := str(n.Value); ok && !slices.Contains(codes, s) {
					codes = append(codes, s)
				}
				if b, ok := n.Value.(*ast.BinaryExpr); ok {
					if s, ok := str(b.X); ok && s == "http_" {
						httpCodes = true
					}
				}
			}
			return true
		})
	}
	require.NotEmpty(t, codes, "no error codes in %s", dir)
	return codes, httpCodes
}

// union returns the string literals of the union that follows anchor
// (and then prop) in the d.ts, up to the ";" or "}" that ends it
// (comments and template literal types left out).
func union(t *testing.T, dts, anchor, prop string) []string {
	t.Helper()
	i := strings.Index(dts, anchor)
	require.GreaterOrEqual(t, i, 0, "no %q in the d.ts", anchor)
	rest := dts[i+len(anchor):]
	k := strings.Index(rest, prop)
	require.GreaterOrEqual(t, k, 0, "no %q after %q in the d.ts", prop, anchor)
	rest = rest[k+len(prop):]
	var out []string
	for _, line := range strings.Split(rest, "\n") {
		code, _, _ := strings.Cut(line, "//")
		code = regexp.MustCompile("`[^`]*`").ReplaceAllString(code, "``") // a template literal is no string and ends nothing
		for _, m := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(code, -1) {
			out = append(out, m[1])
		}
		if strings.ContainsAny(code, ";}") {
			break
		}
	}
	return out
}

// goConsts are the values of the string constants of type typ declared in
// the Go package in dir.
func goConsts(t *testing.T, dir, typ string) []string {
	t.Helper()
	var out []string
	for _, file := range parseDir(t, dir) {
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == typ {
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, err := strconv.Unquote(lit.Value)
						require.NoError(t, err)
						out = append(out, s)
					}
				}
			}
			return true
		})
	}
	require.NotEmpty(t, out, "no constants of type %s in %s", typ, dir)
	return out
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var out []*ast.File
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		out = append(out, file)
	}
	return out
}
