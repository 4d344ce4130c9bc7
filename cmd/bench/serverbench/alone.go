package serverbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tabfence/tabfence/cmd/bench/figures"
	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/pgstore"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	"github.com/tabfence/tabfence/wire"
)

// The receiver alone: Handle and HandleBatch in front of a business handler
// that is one plain INSERT, so the figures are the receiver's own work (its
// claim, savepoint and stored answer per mutation) and not an application's
// contention, such as the demo's counter row that every note updates.
const (
	aloneRoute = "/alone"
	aloneTable = `CREATE TABLE IF NOT EXISTS bench_alone (k TEXT NOT NULL, body TEXT NOT NULL)`
)

// AloneFigure is the receiver-alone scenarios of one store.
type AloneFigure struct {
	Single  Result   // new keys, one request each, from Workers
	Batches []Result // BatchSize new keys per POST; Scenario names the workers
}

// aloneHandler is the one-INSERT business handler.
func aloneHandler(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO bench_alone (k, body) VALUES ($1, $2)`, r.Key, string(r.Body)); err != nil {
		return receiver.Response{}, err
	}
	return receiver.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)}, nil
}

// openAlone opens the store of a receiver-alone run: SQLite in dir, or
// PostgreSQL at db when name is "postgres".
func openAlone(ctx context.Context, name, dir, db string) (receiver.Store, error) {
	if name == "postgres" {
		return pgstore.Open(ctx, db, 0)
	}
	return sqlitestore.Open(ctx, filepath.Join(dir, "alone.db"))
}

// measureAlone runs the receiver-alone scenarios on st.
func measureAlone(ctx context.Context, name string, st receiver.Store) (AloneFigure, error) {
	tx, err := st.Begin(ctx)
	if err != nil {
		return AloneFigure{}, err
	}
	if _, err := tx.Exec(ctx, aloneTable); err != nil {
		_ = tx.Rollback()
		return AloneFigure{}, err
	}
	if err := tx.Commit(); err != nil {
		return AloneFigure{}, err
	}
	rc := receiver.New(st, receiver.Options{
		Scope:  func(r *http.Request) (string, error) { return r.Header.Get(server.DemoUserHeader), nil },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	mux := http.NewServeMux()
	mux.Handle("POST "+aloneRoute, rc.Handle(aloneHandler))
	mux.Handle("POST "+aloneRoute+"/batch", rc.HandleBatch(aloneHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return AloneFigure{}, err
	}
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	c := &client{ctx: ctx, base: "http://" + ln.Addr().String(), http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: Workers * 2}, Timeout: 30 * time.Second}}
	defer c.http.CloseIdleConnections()

	var f AloneFigure
	f.Single, err = load(ctx, name, "alone new key", func(worker, i int) error {
		st, err := c.postTo(aloneRoute, "bench", "alone-"+strconv.Itoa(worker)+"-"+strconv.Itoa(i), `{"n":`+strconv.Itoa(i)+`}`)
		return expect(st, err, http.StatusCreated)
	})
	if err != nil {
		return AloneFigure{}, err
	}
	for _, workers := range []int{Workers, 1} {
		b, err := loadN(ctx, name, strconv.Itoa(workers), workers, BatchRequests, func(worker, i int) error {
			ms := make([]wire.BatchMutation, BatchSize)
			prefix := "alone-batch-" + strconv.Itoa(workers) + "-" + strconv.Itoa(worker) + "-" + strconv.Itoa(i) + "-"
			for j := range ms {
				ms[j] = wire.BatchMutation{Key: prefix + strconv.Itoa(j), Endpoint: aloneRoute, OperationID: prefix + strconv.Itoa(j),
					Operation: "put", Entity: "e" + strconv.Itoa(j), Payload: []byte(`{"n":` + strconv.Itoa(j) + `}`)}
			}
			return c.postBatch(aloneRoute+"/batch", ms)
		})
		if err != nil {
			return AloneFigure{}, err
		}
		f.Batches = append(f.Batches, b)
	}
	return f, nil
}

// postTo POSTs body to path under a new key as user, and returns the status.
func (c *client) postTo(path, user, key, body string) (int, error) {
	req, _ := http.NewRequestWithContext(c.ctx, "POST", c.base+path, strings.NewReader(body))
	req.Header.Set(server.DemoUserHeader, user)
	req.Header.Set(wire.HeaderIdempotencyKey, `"`+key+`"`)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// printAlone prints the receiver-alone rates of each store.
func printAlone(w io.Writer, figs []AloneFigure) error {
	tw := figures.NewTable(w)
	fmt.Fprintf(tw, "store\tworkers\tbatched POSTs\tmutations/s\tp50 ms per POST\tp99 ms per POST\tsingle new key req/s\tbatched / single\ttarget mutations/s\t\n")
	for _, f := range figs {
		for _, b := range f.Batches {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.0f\t%.2fx\t%.0f\t\n", b.Store, b.Scenario, b.N, mutationsPerSec(b),
				ms(b.P50), ms(b.P99), f.Single.RPS(), mutationsPerSec(b)/f.Single.RPS(), batchTargets[b.Store])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "(receiver alone, a one-INSERT handler: %d new keys in %d entities per POST, at most %d POSTs or %s per row; single: new keys from %d workers)\n",
		BatchSize, BatchSize, BatchRequests, Duration, Workers)
	return nil
}

// runAlone opens the store and measures the receiver alone on it.
func runAlone(ctx context.Context, name, dir, db string) (AloneFigure, error) {
	st, err := openAlone(ctx, name, dir, db)
	if err != nil {
		return AloneFigure{}, err
	}
	defer st.Close()
	return measureAlone(ctx, name, st)
}

// runAlonePG measures the receiver alone in a PostgreSQL schema of its own.
func runAlonePG(ctx context.Context, pgURL string) (AloneFigure, error) {
	u, drop, err := pgstore.NewSchema(ctx, pgURL, "alone")
	if err != nil {
		return AloneFigure{}, err
	}
	defer func() { _ = drop(context.Background()) }()
	return runAlone(ctx, "postgres", "", u)
}

// RunAlone measures only the receiver alone, on SQLite and, when pgURL is
// not empty, PostgreSQL, and prints its table to w.
func RunAlone(ctx context.Context, w io.Writer, pgURL string) error {
	dir, err := os.MkdirTemp("", "tabfence-serverbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	figs := []AloneFigure{}
	f, err := runAlone(ctx, "sqlite", dir, "")
	if err != nil {
		return err
	}
	figs = append(figs, f)
	if pgURL != "" {
		if f, err = runAlonePG(ctx, pgURL); err != nil {
			return err
		}
		figs = append(figs, f)
	}
	return printAlone(w, figs)
}
