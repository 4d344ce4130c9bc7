package browser

import _ "embed"

// LoaderJS is the source of append.js, the outbox's hooks in the loader
// (`make build` ships it as dist/tabfence-outbox.js), for the browser
// tests that run it as a module.
//
//go:embed append.js
var LoaderJS string

// loaderLayout is the layout of append.js's hooks this package speaks (its
// layout export): a bump here and there together, when either changes what
// the other passes or expects.
const loaderLayout = 1
