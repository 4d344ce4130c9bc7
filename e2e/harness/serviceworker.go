package harness

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Service Workers over CDP. The ServiceWorker domain is driven from the
// browser's first tab (about:blank, which no test closes): it outlives every
// tab of the app's origin, as a user's browser keeps the app's worker after
// its last tab closed, and it sees every registration of the browser context.
// The state comes from the domain's own events (workerRegistrationUpdated,
// workerVersionUpdated); waits are on those events, never on sleeps.

// SWTimeout bounds one wait for a worker's state (install, activation,
// start, stop) by default: seconds on an idle machine, more on a busy one.
const SWTimeout = 30 * time.Second

// SWVersion is one version of a Service Worker registration as CDP last
// reported it.
type SWVersion struct {
	RegistrationID serviceworker.RegistrationID
	Scope          string // the registration's scope URL
	VersionID      string
	ScriptURL      string
	Status         serviceworker.VersionStatus        // new, installing, installed, activating, activated, redundant
	Running        serviceworker.VersionRunningStatus // stopped, starting, running, stopping
	TargetID       target.ID                          // set while it runs: attach to it to evaluate
}

// ServiceWorkers tracks and drives the browser's Service Workers. Make one
// per browser (Browser.ServiceWorkers).
type ServiceWorkers struct {
	ctx      context.Context // the browser's first tab (Browser.CDP)
	mu       sync.Mutex
	scopes   map[serviceworker.RegistrationID]string // live registrations
	versions map[string]*SWVersion
	errs     []string
	changed  chan struct{} // closed and replaced on every update
}

// ServiceWorkers enables the ServiceWorker domain in the browser's first tab
// and returns the tracker, which has the current registrations and versions
// (Chromium reports them on enable) and follows them from then on. Chromium
// only (the CDP ServiceWorker domain): ErrChromiumOnly elsewhere.
func (b *Browser) ServiceWorkers() (*ServiceWorkers, error) {
	bctx, err := b.CDP()
	if err != nil {
		return nil, err
	}
	s := &ServiceWorkers{ctx: bctx, scopes: map[serviceworker.RegistrationID]string{},
		versions: map[string]*SWVersion{}, changed: make(chan struct{})}
	if err := chromedp.Listen(bctx, s.on); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(bctx, EvalTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, serviceworker.Enable, cdp.Empty{}); err != nil {
		return nil, errors.New("harness: ServiceWorker.enable: " + err.Error())
	}
	return s, nil
}

func (s *ServiceWorkers) on(ev any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e := ev.(type) {
	case *serviceworker.EventWorkerRegistrationUpdated:
		for _, r := range e.Registrations {
			if r.IsDeleted {
				delete(s.scopes, r.RegistrationID)
			} else {
				s.scopes[r.RegistrationID] = r.ScopeURL
			}
		}
	case *serviceworker.EventWorkerVersionUpdated:
		for _, v := range e.Versions {
			s.versions[v.VersionID] = &SWVersion{RegistrationID: v.RegistrationID, VersionID: v.VersionID,
				ScriptURL: v.ScriptURL, Status: v.Status, Running: v.RunningStatus, TargetID: v.TargetID}
		}
	case *serviceworker.EventWorkerErrorReported:
		if m := e.ErrorMessage; m != nil {
			s.errs = append(s.errs, m.SourceURL+":"+strconv.FormatInt(m.LineNumber, 10)+": "+m.ErrorMessage)
		}
	default:
		return
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// Versions returns the versions of the live registration of scope (a URL,
// e.g. server + "/"), oldest first.
func (s *ServiceWorkers) Versions(scope string) []SWVersion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versionsLocked(scope)
}

func (s *ServiceWorkers) versionsLocked(scope string) []SWVersion {
	var out []SWVersion
	for _, v := range s.versions {
		if sc, ok := s.scopes[v.RegistrationID]; ok && sc == scope {
			c := *v
			c.Scope = sc
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b SWVersion) int { return versionNumber(a.VersionID) - versionNumber(b.VersionID) })
	return out
}

func versionNumber(id string) int {
	n, _ := strconv.Atoi(id)
	return n
}

// Errors returns the errors workers reported so far (uncaught exceptions,
// failed evaluations of their scripts): a test prints them when a worker
// does not do what it should.
func (s *ServiceWorkers) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

// Wait waits until cond holds for the versions of scope's live registration
// (oldest first) and returns them; what names the condition in the error.
func (s *ServiceWorkers) Wait(ctx context.Context, what, scope string, timeout time.Duration, cond func([]SWVersion) bool) ([]SWVersion, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		s.mu.Lock()
		vs, changed := s.versionsLocked(scope), s.changed
		s.mu.Unlock()
		if cond(vs) {
			return vs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			msg := "harness: waiting for " + what + " of the Service Worker of " + scope + ": " + ctx.Err().Error()
			if errs := s.Errors(); len(errs) > 0 {
				msg += " (worker errors: " + errs[len(errs)-1] + ")"
			}
			return vs, errors.New(msg + " (versions " + describe(vs) + ")")
		}
	}
}

func describe(vs []SWVersion) string {
	b, _ := json.Marshal(vs)
	return string(b)
}

// Active returns scope's newest activated version, if it has one.
func Active(vs []SWVersion) (SWVersion, bool) {
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Status == serviceworker.VersionStatusActivated {
			return vs[i], true
		}
	}
	return SWVersion{}, false
}

// WaitActive waits until scope's registration has an activated version whose
// script URL satisfies match (nil: any) and returns it.
func (s *ServiceWorkers) WaitActive(ctx context.Context, scope string, match func(scriptURL string) bool) (SWVersion, error) {
	vs, err := s.Wait(ctx, "an active version", scope, SWTimeout, func(vs []SWVersion) bool {
		v, ok := Active(vs)
		return ok && (match == nil || match(v.ScriptURL))
	})
	v, _ := Active(vs)
	return v, err
}

// DispatchSync delivers a sync event with tag to the active worker of scope,
// as the browser does when its registration's time comes (lastChance: the
// browser's last attempt). It starts a stopped worker. It returns once
// Chromium took the command, not when the event's promise settles: a test
// waits for the event's effects.
func (s *ServiceWorkers) DispatchSync(ctx context.Context, scope, tag string, lastChance bool) error {
	v, ok := Active(s.Versions(scope))
	if !ok {
		return errors.New("harness: no active Service Worker at " + scope)
	}
	u, err := url.Parse(scope)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, EvalTimeout)
	defer cancel()
	_, err = chromedp.Call(ctx, serviceworker.DispatchSyncEvent, serviceworker.DispatchSyncEventParams{
		Origin: u.Scheme + "://" + u.Host, RegistrationID: v.RegistrationID, Tag: tag, LastChance: lastChance})
	return err
}

// Stop stops the worker of version v, however busy (CDP stopWorker: its
// event promises are abandoned, nothing of its memory survives, the browser
// releases its Web Locks), and waits until Chromium reports it stopped.
func (s *ServiceWorkers) Stop(ctx context.Context, v SWVersion) error {
	cctx, cancel := context.WithTimeout(s.ctx, EvalTimeout)
	defer cancel()
	if _, err := chromedp.Call(cctx, serviceworker.StopWorker, serviceworker.StopWorkerParams{VersionID: v.VersionID}); err != nil {
		return err
	}
	_, err := s.Wait(ctx, "version "+v.VersionID+" stopped", v.Scope, SWTimeout, func(vs []SWVersion) bool {
		for _, x := range vs {
			if x.VersionID == v.VersionID {
				return x.Running == serviceworker.VersionRunningStatusStopped
			}
		}
		return true // gone
	})
	return err
}

// Worker is a DevTools session attached to a running Service Worker, to
// evaluate in its global scope. While attached, Chromium does not stop the
// worker for being idle; Close detaches.
type Worker struct {
	ctx    context.Context
	cancel context.CancelFunc
	v      SWVersion
}

// Attach attaches to the active worker of scope, starting it if it is
// stopped, once it runs.
func (s *ServiceWorkers) Attach(ctx context.Context, scope string) (*Worker, error) {
	v, ok := Active(s.Versions(scope))
	if !ok {
		return nil, errors.New("harness: no active Service Worker at " + scope)
	}
	if v.Running != serviceworker.VersionRunningStatusRunning || v.TargetID == "" {
		sctx, cancel := context.WithTimeout(s.ctx, EvalTimeout)
		_, err := chromedp.Call(sctx, serviceworker.StartWorker, serviceworker.StartWorkerParams{ScopeURL: scope})
		cancel()
		if err != nil {
			return nil, err
		}
	}
	vs, err := s.Wait(ctx, "version "+v.VersionID+" running", scope, SWTimeout, func(vs []SWVersion) bool {
		for _, x := range vs {
			if x.VersionID == v.VersionID {
				return x.Running == serviceworker.VersionRunningStatusRunning && x.TargetID != ""
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	for _, x := range vs {
		if x.VersionID == v.VersionID {
			v = x
		}
	}
	wctx, cancel := chromedp.NewContext(s.ctx, chromedp.WithTargetID(v.TargetID), chromedp.WithDetachOnCancel())
	// The first run attaches, with the context the session lives as long
	// as (not a child with a deadline: its end would end the session).
	if err := chromedp.Do(wctx); err != nil {
		cancel()
		return nil, errors.New("harness: attaching to the Service Worker: " + err.Error())
	}
	return &Worker{ctx: wctx, cancel: cancel, v: v}, nil
}

// Version is the version this session is attached to.
func (w *Worker) Version() SWVersion { return w.v }

// Close detaches from the worker (it keeps running).
func (w *Worker) Close() { w.cancel() }

// EvalWorker evaluates a JavaScript expression in the worker's global scope,
// awaits it if it is a promise, and decodes its JSON value into T.
func EvalWorker[T any](w *Worker, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(w.ctx, EvalTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// SyncReport is one entry of the worker entry's self.__tabfenceSync: how one
// sync event's drain ended.
type SyncReport struct {
	Tag          string  `json:"tag"`
	LastChance   bool    `json:"lastChance"`
	Acked        int     `json:"acked"`
	Retried      int     `json:"retried"`
	DeadLettered int     `json:"deadLettered"`
	Claimed      int     `json:"claimed"`
	Requests     int     `json:"requests"` // HTTP requests the drain made
	Remaining    int     `json:"remaining"`
	Retry        bool    `json:"retry"`
	Reason       string  `json:"reason"`
	At           float64 `json:"at"`
}

// SyncReports returns the reports of this worker's life so far (a stopped
// worker starts with none), oldest first.
func (w *Worker) SyncReports() ([]SyncReport, error) {
	s, err := EvalWorker[string](w, `JSON.stringify(self.__tabfenceSync || [])`)
	if err != nil {
		return nil, err
	}
	var rs []SyncReport
	err = json.Unmarshal([]byte(s), &rs)
	return rs, err
}

// HideSyncManagerJS removes Background Sync from a page before its scripts
// run, as in browsers without it (Firefox, Safari): no SyncManager, no
// registration.sync.
const HideSyncManagerJS = `delete globalThis.SyncManager;
if (globalThis.ServiceWorkerRegistration) delete ServiceWorkerRegistration.prototype.sync;`

// HideSyncManager makes every document the tab loads from now on start
// without Background Sync (HideSyncManagerJS). Call it before Navigate.
func (t *Tab) HideSyncManager() error { return t.AddInitScript(HideSyncManagerJS) }
