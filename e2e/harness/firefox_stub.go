package harness

import (
	"context"
	"errors"
)

// startBiDi is a placeholder until the Firefox engine (bidi*.go) lands.
func startBiDi(ctx context.Context, o Options) (engine, error) {
	return nil, errors.New("harness: firefox engine not built")
}
