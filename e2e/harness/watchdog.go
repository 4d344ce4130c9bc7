package harness

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// SetFrozen freezes the page (Page Lifecycle "frozen": its timers and
// IndexedDB events stop, it keeps its Web Locks) or resumes it. Chromium
// only (Page.setWebLifecycleState): ErrChromiumOnly elsewhere.
func (t *Tab) SetFrozen(frozen bool) error {
	tctx, err := t.CDP()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(tctx, 10*time.Second)
	defer cancel()
	state := page.SetWebLifecycleStateStateActive
	if frozen {
		state = page.SetWebLifecycleStateStateFrozen
	}
	_, err = chromedp.Call(ctx, page.SetWebLifecycleState, page.SetWebLifecycleStateParams{State: state})
	return err
}

// FrozenTakeover is one frozen-leader takeover between two demo tabs with
// the watchdog on (the demo's ?stallAfter).
type FrozenTakeover struct {
	FrozenAt float64 // ms since the epoch, this machine's clock, when the freeze was sent
	LedAt    float64 // the next tab's onLeader, page clock
	OldToken float64
	NewToken float64
	// NewWrite is the new leader's first fenced apply, made as soon as it
	// leads; OldWrite the old leader's, with its old context, made at once
	// after it was resumed: "accepted", "stale", "duplicate" or an error name.
	NewWrite, OldWrite string
}

// Took is the time from the freeze to the new leader's onLeader, in ms.
func (f FrozenTakeover) Took() float64 { return f.LedAt - f.FrozenAt }

// FreezeLeader freezes the demo tab old, which leads, and waits until the
// demo tab next leads (its leader event number n): the next tab's watchdog
// must steal. The new leader then writes (a fenced apply, fence only), the
// old tab is resumed and at once writes with its old leader context. An
// old write accepted would be a stale write accepted.
func FreezeLeader(old, next *Tab, n int, timeout time.Duration) (FrozenTakeover, error) {
	var r FrozenTakeover
	var err error
	if r.OldToken, err = Eval[float64](old, `(window.__tfOldCtx = tabfenceDemo.ctx).token`); err != nil {
		return r, err
	}
	r.FrozenAt = NowMs()
	if err := old.SetFrozen(true); err != nil {
		return r, err
	}
	ev, werr := next.WaitEvent("leader", n, timeout)
	if werr == nil {
		r.LedAt, r.NewToken = ev.At, ev.Token
		id := strconv.FormatInt(time.Now().UnixNano(), 36)
		r.NewWrite, werr = Eval[string](next, `tabfenceDemo.ctx.apply({ operationID: "new-`+id+`" }).catch((e) => e.name)`)
	}
	if err := old.SetFrozen(false); err != nil {
		return r, err
	}
	if werr != nil {
		return r, werr
	}
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	if r.OldWrite, err = Eval[string](old, `__tfOldCtx.apply({ operationID: "old-`+id+`" }).catch((e) => e.name)`); err != nil {
		return r, err
	}
	if r.NewToken <= r.OldToken {
		return r, errors.New("harness: the new leader's token " + strconv.FormatFloat(r.NewToken, 'f', 0, 64) +
			" is not above the frozen one's " + strconv.FormatFloat(r.OldToken, 'f', 0, 64))
	}
	return r, nil
}

// HeartbeatLogJS, evaluated in a tab, records the arrival time (ms since
// the epoch) of every message on the election's heartbeat channel in
// window.__tfHeartbeats and returns true.
const HeartbeatLogJS = `(() => { const hb = window.__tfHeartbeats = [];
	new BroadcastChannel(tabfenceDemo.election.lockName + "#heartbeat").onmessage = () => hb.push(performance.timeOrigin + performance.now());
	return true; })()`

// HeartbeatGaps returns the gaps between the heartbeats a tab recorded
// (HeartbeatLogJS), in ms.
func HeartbeatGaps(t *Tab) ([]float64, error) {
	at, err := Eval[[]float64](t, `window.__tfHeartbeats || []`)
	if err != nil {
		return nil, err
	}
	var gaps []float64
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i]-at[i-1])
	}
	return gaps, nil
}
