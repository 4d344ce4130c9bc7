// Package upload is the server half of resumable uploads: a tus 1.0
// endpoint (tusd's handler over its file store) bound to the receiver's
// authentication, so an outbox can send a large payload in chunks and
// resume it from the server's offset after any failure instead of from
// byte 0.
//
// tusd alone trusts whoever knows an upload's URL and keeps whatever
// metadata the client sends. This package adds what the outbox needs on
// top: every request is authenticated by Options.Scope; an upload belongs
// to the scope that created it (anyone else gets 404, as if it did not
// exist); a creation carries the record's idempotency key, and a second
// creation for the same user and key answers the first upload instead of
// starting a new one; and the declared SHA-256 is checked once the bytes are
// complete. A business handler calls Server.Complete in its receiver
// transaction before it references an upload, so only whole, verified bytes
// are ever referenced.
//
// The protocol, metadata and limits are in docs/uploads.md.
package upload
