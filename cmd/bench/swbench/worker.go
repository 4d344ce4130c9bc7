package swbench

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"

	"github.com/tabfence/tabfence/e2e/harness"
)

// workers follows the browser's Service Workers over CDP from a control
// tab that is not of the app's origin (about:blank), so it stays open
// while every tab of the origin is closed.
type workers struct {
	ctl  *harness.Tab
	mu   sync.Mutex
	regs map[serviceworker.RegistrationID]*serviceworker.Registration
	vers map[string]*serviceworker.Version
}

func watchWorkers(b *harness.Browser) (*workers, error) {
	ctl, err := b.NewTab()
	if err != nil {
		return nil, err
	}
	w := &workers{ctl: ctl, regs: map[serviceworker.RegistrationID]*serviceworker.Registration{}, vers: map[string]*serviceworker.Version{}}
	if err := chromedp.Listen(ctl.Ctx(), w.on); err != nil {
		ctl.Close()
		return nil, err
	}
	if _, err := chromedp.Call(ctl.Ctx(), serviceworker.Enable, cdp.Empty{}); err != nil {
		ctl.Close()
		return nil, err
	}
	return w, nil
}

func (w *workers) close() { w.ctl.Close() }

func (w *workers) on(ev any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e := ev.(type) {
	case *serviceworker.EventWorkerRegistrationUpdated:
		for _, r := range e.Registrations {
			w.regs[r.RegistrationID] = r
		}
	case *serviceworker.EventWorkerVersionUpdated:
		for _, v := range e.Versions {
			w.vers[v.VersionID] = v
		}
	}
}

// activeOf is the activated version of the registration whose scope is
// scopeURL, if any.
func (w *workers) activeOf(scopeURL string) (serviceworker.Version, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.regs {
		if r.IsDeleted || r.ScopeURL != scopeURL {
			continue
		}
		for _, v := range w.vers {
			if v.RegistrationID == r.RegistrationID && v.Status == serviceworker.VersionStatusActivated {
				return *v, true
			}
		}
	}
	return serviceworker.Version{}, false
}

// waitActive waits for an activated worker of scopeURL whose script is
// scriptPrefix (a path and its query may follow).
func (w *workers) waitActive(ctx context.Context, scopeURL, scriptPrefix string) (serviceworker.Version, error) {
	var got serviceworker.Version
	err := harness.Poll(ctx, "an active worker of "+scopeURL, 30*time.Second, 10*time.Millisecond, func() (bool, error) {
		v, ok := w.activeOf(scopeURL)
		got = v
		return ok && strings.HasPrefix(v.ScriptURL, scriptPrefix), nil
	})
	return got, err
}

func (w *workers) running(versionID string) serviceworker.VersionRunningStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v := w.vers[versionID]; v != nil {
		return v.RunningStatus
	}
	return ""
}

// stop stops the worker (CDP ServiceWorker.stopWorker) and waits until the
// browser reports it stopped: nothing of its memory survives.
func (w *workers) stop(ctx context.Context, versionID string) error {
	if _, err := chromedp.Call(w.ctl.Ctx(), serviceworker.StopWorker, serviceworker.StopWorkerParams{VersionID: versionID}); err != nil {
		return err
	}
	return harness.Poll(ctx, "the worker stopped", 20*time.Second, 5*time.Millisecond, func() (bool, error) {
		return w.running(versionID) == serviceworker.VersionRunningStatusStopped, nil
	})
}

// dispatchSync delivers a sync event with tag to the registration's active
// worker, starting it if it is stopped.
func (w *workers) dispatchSync(origin string, v serviceworker.Version, tag string, lastChance bool) error {
	if v.RegistrationID == "" {
		return errors.New("swbench: no registration to dispatch to")
	}
	_, err := chromedp.Call(w.ctl.Ctx(), serviceworker.DispatchSyncEvent, serviceworker.DispatchSyncEventParams{
		Origin: origin, RegistrationID: v.RegistrationID, Tag: tag, LastChance: lastChance,
	})
	return err
}
