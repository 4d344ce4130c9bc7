package channel

import _ "embed"

// LoaderJS is the source of fast.js, the channel's hooks in the loader
// (`make build` ships it as dist/tabfence-channel.js), for the browser
// tests that run it as a module.
//
//go:embed fast.js
var LoaderJS string
