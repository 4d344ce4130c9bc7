// Package idbstore is the IndexedDB outbox.Store: the durable queue every
// tab of the origin shares. Each method is one transaction of the raw
// IndexedDB layer (idb/raw, wrapped in tx_js.go) with nothing but pure Go
// between its requests.
//
// Files: store_js.go (open, upgrade, close), one per operation
// (enqueue_js.go, claim_js.go, update_js.go, read_js.go, lease_js.go), and
// the stored record's form: recordjson.go (written as one JSON string),
// codec_js.go (read field by field) and fast_js.go with pack.js (read in
// one call, the fields named by pack.go's tables).
package idbstore
