package receiver

import (
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// ErrUnauthenticated may be returned by Options.Scope; any error from Scope
// is answered with 401 before anything is stored.
var ErrUnauthenticated = errors.New("receiver: unauthenticated")

// Defaults for Options fields left zero.
const (
	DefaultMaxBody   = 1 << 20
	DefaultRetention = 24 * time.Hour
	DefaultClaimTTL  = time.Minute
	DefaultTimeout   = 30 * time.Second
	// DefaultBodyTimeout gives a 1 MiB body 20 s: about 50 KB/s, a slow
	// mobile uplink.
	DefaultBodyTimeout = 20 * time.Second
	// DefaultMaxBodyMemory lets 64 bodies of the default MaxBody be
	// received at once.
	DefaultMaxBodyMemory = 64 << 20
	// DefaultMaxBatch is the most mutations one batch may carry.
	DefaultMaxBatch = 100
	// DefaultMaxBatchResponse bounds a batch's answer document.
	DefaultMaxBatchResponse = 4 << 20
)

// Options configure a Receiver. The zero value of each field means its default.
type Options struct {
	// Scope names the authenticated user or tenant the request acts for.
	// Keys and fences are scoped by it, so one user's key never replays
	// another's. An error means 401. Required.
	Scope func(*http.Request) (string, error)
	// MaxBody is the largest request body accepted (default 1 MiB); larger
	// bodies get 413 and nothing is stored.
	MaxBody int64
	// MaxBatch is the most mutations a HandleBatch request may carry
	// (default 100); more get 413 batch-too-large and nothing is stored.
	// The batch's body is bounded by MaxBody too.
	MaxBatch int
	// MaxBatchResponse bounds the bytes of a HandleBatch answer (default
	// 4 MiB): replays of large stored answers, or bodies that grow when
	// escaped in JSON, could make it many times the request. Once the
	// answer would pass it, the later mutations are answered retry (or
	// not-attempted behind them in their entity) without running; a
	// mutation whose fresh answer does not fit is rolled back first. The
	// first answer always fits, so every batch makes progress. The bound
	// counts the results that carry answers: the document's envelope and
	// the short retry and not-attempted results after the bound (each at
	// most 320 bytes besides its key) come on top.
	MaxBatchResponse int64
	// BodyTimeout bounds the time from the start of a request's handling
	// to the last byte of its body (default 20s), as a read deadline on the
	// connection: a client that sends its body too slowly gets 408 and the
	// connection is closed. It needs a ResponseWriter that supports
	// http.ResponseController.SetReadDeadline (net/http's own does; a
	// wrapping writer must have an Unwrap method). A shorter
	// http.Server.ReadTimeout wins.
	BodyTimeout time.Duration
	// MaxBodyMemory caps the bytes of request bodies held in memory at
	// once, across all requests (default 64 MiB, never below MaxBody). A
	// body is charged as its bytes arrive (16 KiB first, then in doubling
	// steps, never past its Content-Length) until its request is answered,
	// so a slow upload holds about what it has sent; past the cap the answer
	// is 503 with Retry-After and nothing is stored, so memory stays
	// bounded however many slow uploads are open.
	MaxBodyMemory int64
	// RejectInvalidUTF8 answers 422 invalid-utf8 to a body that is not
	// valid UTF-8, before the handler or the idempotency record sees it.
	// Set it for JSON or text APIs: encoding/json silently replaces invalid
	// bytes with U+FFFD, so two different ids could decode to one.
	RejectInvalidUTF8 bool
	// Retention is how long a finished answer is kept for replay (default
	// 24h). After it, the record is treated as absent and a retry with the
	// same key runs the handler again: clients must not retry longer.
	Retention time.Duration
	// ClaimTTL bounds how long a request may stay in flight. A claim left by
	// a crashed process expires after it and a retry may run (default 1m).
	ClaimTTL time.Duration
	// Timeout bounds one request's database work (default 30s). The work
	// runs detached from the client's connection, so a client that hangs up
	// mid-request cannot leave a half-done attempt behind.
	Timeout time.Duration
	// ReplayHeaders lists response headers stored and replayed besides
	// Content-Type, Location, ETag, Last-Modified and the fencing header.
	ReplayHeaders []string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Clock returns the current time (default time.Now); tests move it.
	Clock func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatchResponse <= 0 {
		o.MaxBatchResponse = DefaultMaxBatchResponse
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.MaxBodyMemory <= 0 {
		o.MaxBodyMemory = DefaultMaxBodyMemory
	}
	if o.MaxBodyMemory < o.MaxBody {
		o.MaxBodyMemory = o.MaxBody
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.ClaimTTL <= 0 {
		o.ClaimTTL = DefaultClaimTTL
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Scope == nil {
		o.Scope = func(*http.Request) (string, error) { return "", ErrUnauthenticated }
	}
	return o
}

// replayHeaders are the response headers that matter for a replay.
var replayHeaders = []string{"Content-Type", "Location", "ETag", "Last-Modified", "Content-Language", "X-Fencing-Highest"}
