// A user's app bundled by Vite: load() without options, Vite emitting the
// module that the loader names with new URL("./tabfence.wasm", import.meta.url).
import { load } from "tabfence";
import { run } from "./run.js";

window.appResult = run(load());
