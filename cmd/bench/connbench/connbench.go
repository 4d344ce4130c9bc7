// Package connbench measures the realtime connection (tf.connection: one
// WebSocket per browser, held by the leader tab) in headless Chromium, each
// figure beside a raw-JavaScript baseline measured in the same run against
// the same endpoint: the server's connections for 1, 5 and 10 tabs, a
// delta's fan-out from the server to every follower, failover to the first
// delta in the new leader, the resend of pending mutations after a
// failover, and the bytes the connection adds to the download.
//
// The endpoint is receiver/realtime's Server, hosted by the bench in front
// of the demo server (same origin), so the bench publishes through the
// Server's Publish and counts what it applied. The raw baseline speaks the
// wire protocol with the one JavaScript codec in rtcodec.js.
package connbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tabfence/tabfence/cmd/bench/figures"
	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
)

// Targets of the connection.
const (
	targetConnections     = 1   // server connections per browser, whatever the tabs
	targetFanoutOverRawMs = 2   // fan-out p95 at most this much above raw
	targetBrotliKB        = 720 // the full runtime's download
)

// Run measures and prints the figures to w. distDir holds the built runtime
// (make build); gcflags are the Makefile's WASM_GCFLAGS, for the size
// builds. The size figures come first and need no browser.
func Run(ctx context.Context, w io.Writer, distDir string, gcflags []string) error {
	full, without, sizeErr := downloads(ctx, gcflags)
	if err := harness.CheckDist(distDir); err != nil {
		return errors.Join(err, sizeErr)
	}
	ep, err := newEndpoint(ctx)
	if err != nil {
		return err
	}
	defer ep.close()
	srv, err := server.StartLocal(distDir, ep.mount)
	if err != nil {
		return err
	}
	defer srv.Close()
	b, err := harness.Start(ctx, harness.Options{Bare: true})
	if err != nil {
		return err
	}
	defer b.Close()

	var r results
	tfc, rawc := tfCounter(srv, ep), benchCounter(ep)
	r.where = tfc.where
	r.tfConns, r.rawConns = connections(ctx, b, srv.URL, tfc, rawc)
	r.tfFan, r.rawFan, r.tfLead, r.rawLead = fanout(ctx, b, srv.URL, ep)
	r.tfFail, r.rawFail = failover(ctx, b, srv.URL, ep)
	r.tfPend, r.rawPend, r.tfApplied, r.rawApplied = pendingResend(ctx, b, srv.URL, ep)
	r.full, r.without, r.sizeErr = full, without, sizeErr
	r.print(w)
	return r.failures()
}

// results are the figures of one run.
type results struct {
	where                 string
	tfConns, rawConns     []connCount
	tfFan, rawFan         outcome
	tfLead, rawLead       outcome
	tfFail, rawFail       outcome
	tfPend, rawPend       outcome
	tfApplied, rawApplied applyCount
	full, without         download
	sizeErr               error
}

func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "connections: tabs of one scope, counted on %s once every tab is ready; raw JS: a socket per tab\n", r.where)
	fmt.Fprintf(w, "fan-out: %d tabs per side, %d deltas each after %d untimed, alternating in blocks of %d; Server.Publish (bench clock, just before) -> onDelta in the last follower (page clock)\n",
		FanoutTabs, FanoutDeltas, fanoutWarmup, fanoutBlock)
	fmt.Fprintf(w, "  raw JS: the leader tab's own WebSocket (rtcodec.js) + one BroadcastChannel hop, JSON.parse of the changes in each follower\n")
	fmt.Fprintf(w, "failover: %d runs per side, interleaved; close the leader tab -> a delta published at once -> applied in the new leader (close call to page clock)\n", FailoverRuns)
	fmt.Fprintf(w, "pending: %d runs per side; %d mutations made offline in a follower, the leader closes -> every promise resolved (close call to page clock)\n", PendingRuns, PendingMutations)
	fmt.Fprintf(w, "  raw JS: the follower keeps them in memory and sends them once it leads (no durability)\n")
	tw := figures.NewTable(w)
	fmt.Fprintln(tw, "figure\ttabfence\traw JS\ttarget\tmet\t")
	for _, why := range r.unavailable() {
		fmt.Fprintf(tw, "(the tabfence side)\tnot measured: %s\t\t\t\t\n", why)
	}
	for i, k := range ConnTabs {
		tf, raw := r.tfConns[i], r.rawConns[i]
		fmt.Fprintf(tw, "server connections, %d tab(s) open\t%s\t%s\t%d\t%s\t\n", k, tf.cell(), raw.cell(), targetConnections,
			connMet(tf))
	}
	r.printTimes(tw)
	r.printSizes(tw)
	_ = tw.Flush()
}

func (c connCount) cell() string {
	switch {
	case c.err != nil && errors.Is(c.err, errUnavailable):
		return "not measured"
	case c.err != nil:
		return "failed"
	}
	return fmt.Sprintf("%d (%d accepted)", c.open, c.accepted)
}

func connMet(c connCount) string {
	if c.err != nil {
		return ""
	}
	return yes(c.open == targetConnections && c.accepted == targetConnections)
}

func (r *results) printTimes(tw io.Writer) {
	fmt.Fprintf(tw, "fan-out to every follower p50 (ms)\t%s\t%s\t\t\t\n", r.tfFan.cell("%.1f", 50), r.rawFan.cell("%.1f", 50))
	fmt.Fprintf(tw, "fan-out to every follower p95 (ms)\t%s\t%s\t<= raw+%d\t%s\t\n", r.tfFan.cell("%.1f", 95), r.rawFan.cell("%.1f", 95),
		targetFanoutOverRawMs, met(r.tfFan, r.rawFan, func(tf, raw outcome) bool { return tf.pct(95) <= raw.pct(95)+targetFanoutOverRawMs }))
	fmt.Fprintf(tw, "  server -> the leader's own onDelta p50 (ms)\t%s\t%s\t\t\t\n", r.tfLead.cell("%.1f", 50), r.rawLead.cell("%.1f", 50))
	fmt.Fprintf(tw, "  server -> the leader's own onDelta p95 (ms)\t%s\t%s\t\t\t\n", r.tfLead.cell("%.1f", 95), r.rawLead.cell("%.1f", 95))
	fmt.Fprintf(tw, "failover -> first delta in the new leader p50 (ms)\t%s\t%s\t\t\t\n", r.tfFail.cell("%.0f", 50), r.rawFail.cell("%.0f", 50))
	fmt.Fprintf(tw, "failover -> first delta in the new leader p95 (ms)\t%s\t%s\t\t\t\n", r.tfFail.cell("%.0f", 95), r.rawFail.cell("%.0f", 95))
	fmt.Fprintf(tw, "%d pending resent after failover p50 (ms)\t%s\t%s\t\t\t\n", PendingMutations, r.tfPend.cell("%.0f", 50), r.rawPend.cell("%.0f", 50))
	fmt.Fprintf(tw, "%d pending resent after failover max (ms)\t%s\t%s\t\t\t\n", PendingMutations, r.tfPend.cell("%.0f", 100), r.rawPend.cell("%.0f", 100))
	fmt.Fprintf(tw, "ids applied twice / not applied (of %d)\t%s\t%s\t0 / 0\t%s\t\n", PendingRuns*PendingMutations,
		r.tfApplied.cell(r.tfPend), r.rawApplied.cell(r.rawPend), appliedMet(r.tfPend, r.tfApplied))
}

func (c applyCount) cell(o outcome) string {
	if o.err != nil {
		return o.cell("", 0)
	}
	return fmt.Sprintf("%d / %d", c.twice, c.missing)
}

func appliedMet(o outcome, c applyCount) string {
	if o.err != nil {
		return ""
	}
	return yes(c.twice == 0 && c.missing == 0)
}

func (r *results) printSizes(tw io.Writer) {
	kb := func(n int) float64 { return float64(n) / 1024 }
	switch {
	case r.sizeErr != nil:
		fmt.Fprintf(tw, "tabfence.wasm brotli (KB)\tfailed\t\t<= %d\t\t\n", targetBrotliKB)
	case r.full.brotli == 0:
		fmt.Fprintf(tw, "tabfence.wasm brotli (KB)\tnot measured (no brotli on PATH)\t\t<= %d\t\t\n", targetBrotliKB)
	default:
		fmt.Fprintf(tw, "tabfence.wasm brotli (KB)\t%.1f\t\t<= %d\t%s\t\n", kb(r.full.brotli), targetBrotliKB, yes(kb(r.full.brotli) <= targetBrotliKB))
		fmt.Fprintf(tw, "  without the connection (-tags tabfence_noconnection) brotli (KB)\t%.1f\t\t\t\t\n", kb(r.without.brotli))
		fmt.Fprintf(tw, "  the connection's added bytes, brotli\t%d\t\t\t\t\n", r.full.brotli-r.without.brotli)
		fmt.Fprintf(tw, "  the connection's added bytes, uncompressed\t%d\t\t\t\t\n", r.full.raw-r.without.raw)
	}
}

// unavailable says why tabfence's figures were not measured, once.
func (r *results) unavailable() []string {
	for _, err := range []error{firstErr(r.tfConns), r.tfFan.err, r.tfFail.err, r.tfPend.err} {
		if err != nil && errors.Is(err, errUnavailable) {
			_, why, _ := strings.Cut(err.Error(), errUnavailable.Error()+": ")
			return []string{why}
		}
	}
	return nil
}

func firstErr(cs []connCount) error {
	for _, c := range cs {
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// failures are the errors of the sides that ran and failed: the part fails
// (figures.md keeps its last block) and says why.
func (r *results) failures() error {
	errs := []error{r.sizeErr}
	for i, k := range ConnTabs {
		errs = append(errs, outcome{err: r.tfConns[i].err}.failure(fmt.Sprintf("tabfence, %d tabs", k)),
			outcome{err: r.rawConns[i].err}.failure(fmt.Sprintf("raw JS, %d tabs", k)))
	}
	errs = append(errs, r.tfFan.failure("tabfence fan-out"), r.rawFan.failure("raw JS fan-out"),
		r.tfFail.failure("tabfence failover"), r.rawFail.failure("raw JS failover"),
		r.tfPend.failure("tabfence pending resend"), r.rawPend.failure("raw JS pending resend"))
	return errors.Join(errs...)
}
