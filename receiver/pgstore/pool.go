package pgstore

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// pool is a bounded set of pgx connections. A connection that saw an error
// is closed rather than reused unless it is still healthy: a failed query
// leaves a pgx.Conn usable, a broken socket does not.
type pool struct {
	cfg  *pgx.ConnConfig
	sem  chan struct{}
	mu   sync.Mutex
	idle []*pgx.Conn
	shut bool
}

func newPool(cfg *pgx.ConnConfig, max int) *pool {
	return &pool{cfg: cfg, sem: make(chan struct{}, max)}
}

func (p *pool) acquire(ctx context.Context) (*pgx.Conn, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !c.IsClosed() {
			p.mu.Unlock()
			return c, nil
		}
	}
	p.mu.Unlock()
	c, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		<-p.sem
		return nil, err
	}
	return c, nil
}

func (p *pool) release(c *pgx.Conn, err error) {
	defer func() { <-p.sem }()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shut || c.IsClosed() || c.PgConn().IsBusy() || c.PgConn().TxStatus() != 'I' {
		_ = c.Close(context.Background())
		return
	}
	p.idle = append(p.idle, c)
}

func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shut = true
	for _, c := range p.idle {
		_ = c.Close(context.Background())
	}
	p.idle = nil
}
