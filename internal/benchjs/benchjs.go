// Package benchjs holds the raw JavaScript that tabfence's figures compare
// it with, as real .js files: one source for the bench and for the tests
// that split the same transactions into phases.
package benchjs

import _ "embed"

// IDBSource is idb.js: the raw JavaScript transactions the idb layer is
// measured against (a function body; IDB makes it).
//
//go:embed idb.js
var IDBSource string

// IDBStore is the app store idb.js's apply writes to: the database under
// test must have it.
const IDBStore = "bench"
