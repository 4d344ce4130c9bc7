//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// Background Sync end to end: the demo's notes pages (obEnv), the demo's
// Service Worker (cmd/tabfence/server/demo/sw.js, the worker entry
// tabfence-sw.js), driven over CDP from the browser's first tab
// (harness.ServiceWorkers), which outlives every tab of the demo's origin.
//
// Pages that should not register the sync tag themselves open with
// bgsync=0: this machine is online, so Chromium fires a registered tag at
// once, by itself, and a test that needs the event at a moment of its
// choosing (after every tab closed, beside two flushing tabs) dispatches it
// with CDP instead. TestSWPagesRegisterTheTag covers the registration.

// swTimeout bounds a drain: a worker's cold start and a flush on a busy
// machine.
const swTimeout = 60 * time.Second

// swEnv is an outbox environment with the demo's worker.
type swEnv struct {
	*obEnv
	sw    *harness.ServiceWorkers
	scope string // the worker's scope: the demo's root
	w     *harness.Worker
}

func setupSW(t *testing.T, k harness.Kind) *swEnv { return setupSWMW(t, k, nil) }

// setupSWMW is setupSW with mw in front of noteCtl (setupOutboxMW).
func setupSWMW(t *testing.T, k harness.Kind, mw func(http.Handler) http.Handler) *swEnv {
	t.Helper()
	e := &swEnv{obEnv: setupOutboxMW(t, k, harness.Options{}, mw)}
	var err error
	e.sw, err = e.b.ServiceWorkers()
	require.NoError(t, err)
	e.scope = e.url + "/"
	t.Cleanup(e.detach)
	return e
}

// swTab opens a notes tab with the worker registered (sw=1) and extra.
func (e *swEnv) swTab(queue, user string, extra url.Values) *harness.Tab {
	e.t.Helper()
	q := url.Values{"sw": {"1"}}
	for k, v := range extra {
		q[k] = v
	}
	return e.tab(queue, user, q)
}

// active waits for an activated worker whose script URL has schema
// (0: any) and returns it.
func (e *swEnv) active(schema int) harness.SWVersion {
	e.t.Helper()
	v, err := e.sw.WaitActive(context.Background(), e.scope, func(script string) bool { return hasSchema(script, schema) })
	require.NoError(e.t, err)
	return v
}

// hasSchema says whether a worker's script URL asks for the outbox schema
// (its schema parameter, 1 when absent); schema 0 matches any.
func hasSchema(script string, schema int) bool {
	if schema == 0 {
		return true
	}
	u, err := url.Parse(script)
	if err != nil {
		return false
	}
	got := u.Query().Get("schema")
	if got == "" {
		got = "1"
	}
	return got == strconv.Itoa(schema)
}

// dispatch fires a sync event of tag at the active worker.
func (e *swEnv) dispatch(tag string, lastChance bool) {
	e.t.Helper()
	require.NoError(e.t, e.sw.DispatchSync(context.Background(), e.scope, tag, lastChance))
}

// detach ends the DevTools session to the worker, if any.
func (e *swEnv) detach() {
	if e.w != nil {
		e.w.Close()
		e.w = nil
	}
}

// reports reads the active worker's self.__tabfenceSync, attaching to it
// (and starting it, if stopped) when not attached to that version.
func (e *swEnv) reports() ([]harness.SyncReport, error) {
	v, ok := harness.Active(e.sw.Versions(e.scope))
	if e.w != nil && (!ok || e.w.Version().VersionID != v.VersionID) {
		e.detach()
	}
	if e.w == nil {
		w, err := e.sw.Attach(context.Background(), e.scope)
		if err != nil {
			return nil, err
		}
		e.w = w
	}
	rs, err := e.w.SyncReports()
	if err != nil {
		e.detach() // stopped: attach again next time
	}
	return rs, err
}

// waitReport waits until the worker's life so far has n reports of tag and
// returns the nth.
func (e *swEnv) waitReport(tag string, n int) harness.SyncReport {
	e.t.Helper()
	return e.waitReportWhere(strconv.Itoa(n)+" sync report(s) of "+tag, func(rs []harness.SyncReport) (harness.SyncReport, bool) {
		k := 0
		for _, r := range rs {
			if r.Tag == tag {
				if k++; k == n {
					return r, true
				}
			}
		}
		return harness.SyncReport{}, false
	})
}

// waitReportSince waits for the first report of tag made at or after since
// (ms since the epoch, harness.NowMs), whichever life of the worker made it.
func (e *swEnv) waitReportSince(tag string, since float64) harness.SyncReport {
	e.t.Helper()
	return e.waitReportWhere("a sync report of "+tag+" since the dispatch", func(rs []harness.SyncReport) (harness.SyncReport, bool) {
		for _, r := range rs {
			if r.Tag == tag && r.At >= since {
				return r, true
			}
		}
		return harness.SyncReport{}, false
	})
}

func (e *swEnv) waitReportWhere(what string, pick func([]harness.SyncReport) (harness.SyncReport, bool)) harness.SyncReport {
	e.t.Helper()
	var got harness.SyncReport
	var last []harness.SyncReport
	err := harness.Poll(context.Background(), what, swTimeout, 50*time.Millisecond, func() (bool, error) {
		rs, err := e.reports()
		if err != nil {
			return false, err
		}
		last = rs
		var ok bool
		got, ok = pick(rs)
		return ok, nil
	})
	require.NoError(e.t, err, "reports %+v; worker errors %v; effects %d", last, e.sw.Errors(), e.effects())
	return got
}

// effectsLog returns the server's new effects so far, in order.
func (e *obEnv) effectsLog() []noteEffect {
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	return append([]noteEffect(nil), e.ctl.effectLog...)
}

// requireOncePerKey checks that the server changed once per key of want,
// and nothing else.
func (e *obEnv) requireOncePerKey(want int) {
	e.t.Helper()
	byKey := map[string]int{}
	for _, ef := range e.effectsLog() {
		byKey[ef.Key]++
	}
	require.Len(e.t, byKey, want, "keys with an effect")
	for k, n := range byKey {
		require.Equal(e.t, 1, n, "effects of key %s", k)
	}
	require.Equal(e.t, want, e.effects(), "effects the server counted")
}

// requireFencesNeverBack checks one owner at a time as the server saw it:
// no effect under a fencing token lower than that of an effect the server
// had already made before the request arrived.
func (e *obEnv) requireFencesNeverBack() map[uint64]int {
	e.t.Helper()
	log := e.effectsLog()
	byTok := map[uint64]int{}
	for _, ef := range log {
		byTok[ef.Token]++
		require.NotZero(e.t, ef.Token, "an effect of %s without a fencing token", ef.Key)
		for _, before := range log {
			if before.Applied.Before(ef.Arrived) && before.Token > ef.Token {
				e.t.Fatalf("effect of %s under token %d arrived after the server applied %s under token %d",
					ef.Key, ef.Token, before.Key, before.Token)
			}
		}
	}
	return byTok
}

// tokens lists the fencing tokens that made effects, ascending.
func tokens(byTok map[uint64]int) []uint64 {
	out := make([]uint64, 0, len(byTok))
	for t := range byTok {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// notesBodies returns the decoded JSON bodies of the server's effects by
// the note id in them.
func (e *swEnv) notesBodies() map[string]map[string]any {
	e.t.Helper()
	out := map[string]map[string]any{}
	for _, ef := range e.effectsLog() {
		var v map[string]any
		require.NoError(e.t, json.Unmarshal(ef.Body, &v), "body %s", ef.Body)
		id, _ := v["id"].(string)
		out[id] = v
	}
	return out
}

// syncTag is the queue's Background Sync tag: its flush lock's name.
func syncTag(t *testing.T, tab *harness.Tab) string {
	t.Helper()
	return eval[string](t, tab, `tabfenceNotes.outbox.lockName`)
}
