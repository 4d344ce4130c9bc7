package channel

import "github.com/tabfence/tabfence/jsglue/loader"

// loaderFastPath is the loader's FAST object (jsglue/loader/tabfence.js),
// which the browser tests install to run the channel through it, as pages
// do.
var loaderFastPath = loader.FastPath()
