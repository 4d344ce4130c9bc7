// The same app without a bundler: the installed package served as it is,
// load() finding tabfence.wasm and wasm_exec.js beside the loader.
import { load } from "/pkg/tabfence.js";
import { run } from "./run.js";

window.appResult = run(load());
