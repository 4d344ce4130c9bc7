// Package receiver is the server half of tabfence: it makes a retried browser
// mutation take effect at most once and rejects writes from a stale leader.
//
// A browser outbox can only promise at-least-once delivery (a dropped
// keep-alive connection makes Chromium resend a committed POST by itself), so
// the server decides whether a retry creates a new effect. The receiver does
// that with two mechanisms that solve different problems:
//
//   - Idempotency-Key (IETF httpapi draft): the first request with a key runs
//     the business handler; its answer is stored with the key, scoped by the
//     authenticated user and bound to a fingerprint of the payload, and every
//     later request with the key gets that answer replayed.
//   - Fencing tokens: a leader tab obtains a server-issued token for a resource
//     (POST /fence/{resource}) and sends it with each write; the receiver
//     rejects tokens lower than the highest it accepted, so a deposed leader's
//     late writes cannot overwrite a newer leader's.
//
// The business handler runs inside the same database transaction that stores
// the idempotency record and advances the fence, so the three commit or roll
// back together. See README.md for the protocol table.
package receiver
