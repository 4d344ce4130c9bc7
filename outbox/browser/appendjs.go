package browser

import _ "embed"

// LoaderJS is the source of append.js, the outbox's hooks in the loader
// (`make build` ships it as dist/tabfence-outbox.js), for the browser
// tests that run it as a module.
//
//go:embed append.js
var LoaderJS string
