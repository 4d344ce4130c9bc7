package sim

import "github.com/tabfence/tabfence/outbox"

// setBatch makes cfg's Outbox send its due records in batches to endpoint,
// at most max per request.
func setBatch(cfg *outbox.Config, endpoint string, max int) {
	cfg.BatchEndpoint, cfg.BatchMax = endpoint, max
}
