// A user's app: the tabfence package from npm, bundled by esbuild.
import { load } from "tabfence";
import wasmURL from "tabfence/wasm"; // --loader:.wasm=file: the URL of the emitted file
import { run } from "./run.js";

window.appResult = run(load({ wasmURL }));
