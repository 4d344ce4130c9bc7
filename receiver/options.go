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
