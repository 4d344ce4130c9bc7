// A user's Service Worker: the worker entry of the tabfence package from
// npm, bundled by esbuild into one module (wasm_exec.js and the loader
// inlined: a Service Worker cannot import() them).
import { backgroundSync } from "tabfence/sw";
import wasmURL from "tabfence/wasm"; // --loader:.wasm=file: the URL of the emitted file

backgroundSync({
  wasmURL,
  outboxes: [{ name: "npm-worker", endpoint: "/api/notes", policies: { "put-note": { dedupe: "append" } } }],
});
