package channel

import _ "embed"

// LoaderJS is the source of fast.js, the channel's hooks in the loader
// (`make build` ships it as dist/tabfence-channel.js), for the browser
// tests that run it as a module.
//
//go:embed fast.js
var LoaderJS string

// loaderLayout is the layout of fast.js's hooks this package speaks (its
// layout export): a bump here and there together, when either changes what
// the other passes or expects.
const loaderLayout = 1
