package outside

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The docs whose ```ts and ```js blocks must type-check against the
// loader's types (docs/*.md are added to these).
var tsDocs = []string{"README.md", "receiver/README.md"}

// The names a JavaScript snippet takes from the reader's own page (or worker).
const snippetGlobals = `
declare const socket: { connect(options: { signal: AbortSignal }): void; onDelta: (delta: { id: string; text: string }) => void };
declare const ui: { role: string; apply(payload: unknown): void; show(status: unknown): void };
declare function loadFromStorage(): Promise<{ token: number; seq: number }>;
declare function reloadFromStorage(): void;
declare const stealButton: { onclick: (() => void) | null };
// A Service Worker's global (the snippets are checked with the DOM's types).
declare const clients: { matchAll(options?: { type?: "window" | "all"; includeUncontrolled?: boolean }): Promise<{ postMessage(message: unknown, transfer: Transferable[]): void }[]> };
`

// The compiler's settings: the strict checks a TypeScript user turns on,
// and module resolution as a bundler does it ("tabfence" is the package).
const tsconfig = `{
  "compilerOptions": {
    "strict": true, "noEmit": true, "target": "es2022", "module": "esnext",
    "moduleResolution": "bundler", "lib": ["es2022", "dom"],
    "allowJs": true, "checkJs": true, "skipLibCheck": false,
    "paths": { "tabfence": ["./tabfence.d.ts"], "tabfence/sw": ["./tabfence-sw.d.ts"] }
  },
  "include": ["*.ts", "*.js"]
}
`

// TestTypeScriptSnippetsTypeCheck runs tsc --strict (TypeScript from npm,
// installed by make) on every ```ts and ```js block of the docs, each a
// module importing "tabfence" (and "tabfence/sw") typed by
// jsglue/loader/tabfence.d.ts (and tabfence-sw.d.ts): a snippet that a
// user copies compiles under their strict settings.
func TestTypeScriptSnippetsTypeCheck(t *testing.T) {
	tsc := tscPath(t)
	root := moduleRoot(t)
	dir := tsProject(t, root)
	n, named := 0, map[string]string{}
	for _, doc := range docsWithSnippets(t, root) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		require.NoError(t, err)
		for _, m := range regexp.MustCompile("(?ms)^```(ts|js)\n(.*?)^```").FindAllSubmatch(b, -1) {
			name := strings.NewReplacer("/", "_", ".", "_").Replace(doc) + "_" + strconv.Itoa(n) + "." + string(m[1])
			if f := snippetFile(string(m[2]), string(m[1])); f != "" {
				require.Empty(t, named[f], "%s names a snippet %s, as %s does", doc, f, named[f])
				name, named[f] = f, doc
			}
			writeFile(t, filepath.Join(dir, name), "// "+doc+"\n"+asModule(string(m[2])))
			n++
		}
	}
	require.GreaterOrEqual(t, n, 1, "TypeScript and JavaScript snippets found")
	out, err := runTSC(tsc, dir)
	require.NoError(t, err, "tsc --strict on the docs' snippets:\n%s", out)
}

// TestOperationTypoDoesNotCompile: the outbox's types guard the app's
// operations; an enqueue of an operation type the outbox has no policy
// for, or a payload of another shape, is a compile error.
func TestOperationTypoDoesNotCompile(t *testing.T) {
	tsc := tscPath(t)
	dir := tsProject(t, moduleRoot(t))
	const opened = `import { load } from "tabfence";
type Note = { id: string; text: string };
const tf = await load({ wasmURL: "/tabfence.wasm" });
const outbox = await tf.outbox<{ "note.update": Note }>({ name: "notes", endpoint: "/api/notes",
  policies: { "note.update": { dedupe: "replace-latest" } } });
const inferred = await tf.outbox({ name: "notes", endpoint: "/api/notes",
  policies: { "note.update": { dedupe: "replace-latest" } } });
`
	writeFile(t, filepath.Join(dir, "ok.ts"), opened+`await outbox.enqueue({ operationType: "note.update", payload: { id: "n1", text: "hi" } });
await inferred.enqueue({ operationType: "note.update", payload: 1 });
`)
	out, err := runTSC(tsc, dir)
	require.NoError(t, err, "the well-typed enqueues compile:\n%s", out)
	for _, c := range []struct{ enqueue, want string }{
		{`outbox.enqueue({ operationType: "note.updat", payload: { id: "n1", text: "hi" } })`, `'"note.updat"'`},
		{`inferred.enqueue({ operationType: "note.updat", payload: 1 })`, `'"note.updat"'`},
		{`outbox.enqueue({ operationType: "note.update", payload: { id: "n1" } })`, `'text'`},
	} {
		writeFile(t, filepath.Join(dir, "ok.ts"), opened+"await "+c.enqueue+";\n")
		out, err := runTSC(tsc, dir)
		require.Error(t, err, "%s compiles", c.enqueue)
		require.Contains(t, out, c.want, "%s", c.enqueue)
	}
}

// TestWorkerEntryTypeChecks: a worker importing "tabfence/sw" with the
// pages' outbox options (a batch endpoint among them) compiles, its
// report's reason is the union, and a misspelt option, or a batch option
// without its endpoint, does not compile.
func TestWorkerEntryTypeChecks(t *testing.T) {
	tsc := tscPath(t)
	dir := tsProject(t, moduleRoot(t))
	const worker = `import { backgroundSync } from "tabfence/sw";
import type { OutboxOptions, SyncReason } from "tabfence";
type Note = { id: string; text: string };
const notes: OutboxOptions<{ "note.update": Note }> = { name: "notes", endpoint: "/api/notes",
  batch: { endpoint: "/api/notes/batch", max: 100 },
  headers: async (user) => ({ "X-Demo-User": user }), policies: { "note.update": { dedupe: "replace-latest" } } };
backgroundSync({ outboxes: [notes], cache: false, lockWaitMs: 60000, onReport(r) {
  const reason: SyncReason = r.reason;
  console.log(r.tag, r.lastChance, r.acked, r.requests, r.remaining, r.retry, reason);
} });
`
	writeFile(t, filepath.Join(dir, "sw.ts"), worker)
	out, err := runTSC(tsc, dir)
	require.NoError(t, err, "the worker compiles:\n%s", out)
	writeFile(t, filepath.Join(dir, "sw.ts"), strings.Replace(worker, "lockWaitMs", "lockWaitMS", 1))
	out, err = runTSC(tsc, dir)
	require.Error(t, err, "a misspelt option compiles")
	require.Contains(t, out, "lockWaitMS")
	for _, c := range []struct{ bad, want string }{
		{`batch: { endpoint: "/api/notes/batch", maxx: 100 }`, "'maxx'"},
		{`batch: { max: 100 }`, "'endpoint'"},
		{`batch: "/api/notes/batch"`, "{ endpoint: string;"},
	} {
		writeFile(t, filepath.Join(dir, "sw.ts"), strings.Replace(worker, `batch: { endpoint: "/api/notes/batch", max: 100 }`, c.bad, 1))
		out, err = runTSC(tsc, dir)
		require.Error(t, err, "%s compiles", c.bad)
		require.Contains(t, out, c.want, "%s", c.bad)
	}
}

// tscPath is the TypeScript compiler make installs (TABFENCE_TSC). Outside
// make the test is skipped, never in CI.
func tscPath(t *testing.T) string {
	tsc := os.Getenv("TABFENCE_TSC")
	if tsc == "" {
		require.Empty(t, os.Getenv("CI"), "CI runs make test, which sets TABFENCE_TSC")
		t.Skip("TABFENCE_TSC unset: make test-native installs TypeScript and sets it")
	}
	return tsc
}

// tsProject is a directory with the loader's types, the worker entry's,
// and the compiler's settings.
func tsProject(t *testing.T, root string) string {
	dir := t.TempDir()
	dts, err := os.ReadFile(filepath.Join(root, "jsglue", "loader", "tabfence.d.ts"))
	require.NoError(t, err)
	writeFile(t, filepath.Join(dir, "tabfence.d.ts"), string(dts))
	sw, err := os.ReadFile(filepath.Join(root, "jsglue", "loader", "tabfence-sw.d.ts"))
	require.NoError(t, err)
	writeFile(t, filepath.Join(dir, "tabfence-sw.d.ts"), string(sw))
	writeFile(t, filepath.Join(dir, "globals.d.ts"), snippetGlobals)
	writeFile(t, filepath.Join(dir, "tsconfig.json"), tsconfig)
	return dir
}

func docsWithSnippets(t *testing.T, root string) []string {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	out := append([]string{}, tsDocs...)
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// snippetFile is the file name a snippet gives itself on its first line
// (`// outbox-options.js: ...`), so that the docs' other snippets can
// import it by that name, as a reader's files do; "" when it names none.
// The name must end in the snippet's language.
func snippetFile(src, lang string) string {
	m := regexp.MustCompile(`^// ([A-Za-z0-9_-]+\.(?:js|ts))(?::|\s*$)`).FindStringSubmatch(strings.SplitN(src, "\n", 2)[0])
	if m == nil || !strings.HasSuffix(m[1], "."+lang) {
		return ""
	}
	return m[1]
}

// asModule makes a snippet an ES module (top-level await needs one).
func asModule(src string) string {
	if regexp.MustCompile(`(?m)^\s*(import|export)\s`).MatchString(src) {
		return src
	}
	return src + "\nexport {};\n"
}

func runTSC(tsc, dir string) (string, error) {
	cmd := exec.Command(tsc, "-p", "tsconfig.json")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}
