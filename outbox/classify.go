package outbox

import (
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
)

// Verdict is what the flusher does with one send's result (queue.Verdict).
type Verdict = queue.Verdict

// Classify turns a transport result into a Verdict: queue.Classify, the
// single client-side policy table of answers.
func Classify(resp Response, err error, now time.Time) Verdict {
	return queue.Classify(resp.Status, resp.Header, resp.Body, err, now)
}

// Backoff is the retry timing of records (queue.Backoff): exponential
// backoff with full jitter, Retry-After a floor.
type Backoff = queue.Backoff
