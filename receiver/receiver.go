package receiver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/tabfence/tabfence/wire"
)

// Handler is a business handler. It runs inside the transaction that stores
// the idempotency record and advances the fence: write through tx only. An
// error or a 5xx Response rolls everything back and stores nothing; a 2xx or
// 4xx Response is stored and replayed for retries of the same key. On a 4xx
// the handler's own writes are rolled back (to a savepoint) while the answer
// itself is kept, so a rejected command has no effect however often it is
// retried. An error wrapping ErrInvalidText (text the store refused) is
// client input, not a failure: it is answered and stored as 422 invalid-text.
// Under HandleBatch the same rules hold per mutation, "everything" being
// that mutation's savepoint.
type Handler func(ctx context.Context, tx Tx, r *Request) (Response, error)

// Receiver guards business handlers with idempotency keys and fencing tokens.
type Receiver struct {
	store  Store
	opts   Options
	log    *slog.Logger
	replay []string
	bodies *budget
	// noDeadline warns once that BodyTimeout cannot be enforced.
	noDeadline sync.Once
}

// New returns a Receiver over store. It does not take ownership of store.
func New(store Store, opts Options) *Receiver {
	opts = opts.withDefaults()
	return &Receiver{
		store:  store,
		opts:   opts,
		log:    opts.Logger.With("component", "receiver"),
		replay: append(append([]string{}, replayHeaders...), opts.ReplayHeaders...),
		bodies: &budget{max: opts.MaxBodyMemory},
	}
}

// Store returns the store the receiver writes to.
func (rc *Receiver) Store() Store { return rc.store }

// Handle wraps h as an http.Handler for a mutation (POST, PUT, PATCH or
// DELETE). Safe methods get 405: they need no idempotency key.
func (rc *Receiver) Handle(h Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.serve(w, r, h)
	})
}

func isMutation(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request, h Handler) {
	rc.armBodyDeadline(w, r)
	scope, hd, ok := rc.admit(w, r)
	if !ok {
		return
	}
	body, release, bp := rc.readBody(w, r)
	if bp != nil {
		writeBodyProblem(w, *bp)
		return
	}
	defer release()
	disarmBodyDeadline(w)
	target := r.URL.Path
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery // a query can carry payload too
	}
	req := &Request{HTTP: r, Scope: scope, Key: hd.key, Body: body, Resource: hd.resource, Token: hd.token, OperationID: hd.opID}
	writeResponse(w, rc.apply(r.Context(), r.Method, target, req, h))
}

// apply runs an admitted mutation through the key's record and the fence:
// a replay, a refusal, or the handler in the transaction that stores its
// answer. Every outcome is a Response (problems rendered as such). method
// and target, with the scope and body, are what the key's fingerprint binds.
func (rc *Receiver) apply(ctx context.Context, method, target string, req *Request, h Handler) Response {
	// Detach from the client's connection: once claimed, an attempt runs to
	// its end (commit or rollback and release), so a hang-up cannot leave an
	// ambiguous half-state. Timeout still bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rc.opts.Timeout)
	defer cancel()
	fp := fingerprint(method, target, req.Scope, req.Body)
	claimID := newClaimID()
	log := rc.log.With("key", req.Key, "op", req.OperationID, "target", target)
	outcome, rec, err := rc.claim(ctx, req.Scope, req.Key, fp, claimID, req.Resource, req.Token)
	var p *Problem
	if outcome == claimFenced && errors.As(err, &p) {
		return ProblemResponse(*p)
	}
	if err != nil {
		log.Error("claim", "err", err)
		return ProblemResponse(probInternal)
	}
	if v, answered := rc.unrun(outcome, rec); answered {
		log.Debug("not run", "status", v.resp.Status, "outcome", v.outcome)
		return v.response()
	}
	resp, stored, err := rc.run(ctx, req, claimID, h)
	if !stored {
		rc.release(req.Scope, req.Key, claimID)
	}
	if err != nil {
		return errorVerdict(log, err).response()
	}
	log.Debug("ran", "status", resp.Status, "stored", stored)
	return resp
}

// admit checks what needs no body: a mutating method, an authenticated
// scope matching any client user header, well-formed idempotency and
// fencing headers. It has answered the request when ok is false.
func (rc *Receiver) admit(w http.ResponseWriter, r *http.Request) (scope string, hd headers, ok bool) {
	if !isMutation(r.Method) {
		w.Header().Set("Allow", "POST, PUT, PATCH, DELETE")
		writeProblem(w, probMethod)
		return "", hd, false
	}
	scope, ok = rc.authenticate(w, r)
	if !ok {
		return "", hd, false
	}
	hd, err := parseHeaders(r.Header)
	if err != nil {
		writeProblem(w, headerProblem(err))
		return "", hd, false
	}
	return scope, hd, true
}

// authenticate finds the request's scope and checks the client user header
// against it. It has answered the request when ok is false.
func (rc *Receiver) authenticate(w http.ResponseWriter, r *http.Request) (scope string, ok bool) {
	scope, err := rc.opts.Scope(r)
	if err != nil || scope == "" || !ValidText(scope) {
		writeProblem(w, probUnauthenticated)
		return "", false
	}
	if p := checkClientUser(r.Header, scope); p != nil {
		writeProblem(w, *p)
		return "", false
	}
	return scope, true
}

// run executes the fence check, the handler and the record update in one
// transaction. stored reports whether the answer was committed with the key.
func (rc *Receiver) run(ctx context.Context, req *Request, claimID string, h Handler) (resp Response, stored bool, err error) {
	tx, err := rc.store.Begin(ctx)
	if err != nil {
		return Response{}, false, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	// The key's row is not touched before finish, which asserts the claim
	// (errClaimLost after a takeover past ClaimTTL: nothing commits). So
	// while the handler runs, a batch carrying the key reads it in flight
	// instead of waiting on the row (PostgreSQL), and locks are taken in
	// a batch's order: the fence, then the key.
	if req.Resource != "" {
		if err := rc.checkFence(ctx, tx, req.Scope, req.Resource, req.Token); err != nil {
			return Response{}, false, err
		}
	}
	if _, err := tx.Exec(ctx, `SAVEPOINT tabfence_handler`); err != nil {
		return Response{}, false, err
	}
	resp, stored, err = rc.runHandler(ctx, tx, req, h, func() error {
		_, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT tabfence_handler`)
		return err
	}, func(resp Response) error {
		return rc.finish(ctx, tx, req.Scope, req.Key, claimID, resp)
	})
	if err != nil || !stored {
		return resp, false, err
	}
	if err := tx.Commit(); err != nil {
		// The connection may have died after the database committed: the
		// claim's release then matches nothing, and a retry replays.
		return Response{}, false, fmt.Errorf("%w: %w", errCommitUnknown, err)
	}
	committed = true
	return resp, true, nil
}

// runHandler runs the handler of a claimed key in tx and, for a 2xx or 4xx
// answer, stores it with the key by keep (a 4xx's own writes undone first:
// undo rolls back to a savepoint taken before the handler, keeping the
// claim). stored is false for a 5xx, whose writes the caller rolls back; an
// error, a panic or an invalid status is err. Handle and a batch's
// mutations share it (a batch keeps its answers to store them together).
func (rc *Receiver) runHandler(ctx context.Context, tx Tx, req *Request, h Handler, undo func() error, keep func(Response) error) (resp Response, stored bool, err error) {
	resp, err = callHandler(ctx, tx, req, h)
	if errors.Is(err, ErrInvalidText) {
		resp, err = ProblemResponse(probInvalidText), nil // client input: a 4xx, stored
	}
	if err != nil {
		return Response{}, false, err
	}
	if resp.Status == 0 {
		resp.Status = http.StatusOK
	}
	if resp.Status < 200 || resp.Status > 599 {
		return Response{}, false, fmt.Errorf("%w: %d", ErrBadStatus, resp.Status)
	}
	if resp.Status >= 500 {
		return resp, false, nil
	}
	if resp.Status >= 400 {
		if err := undo(); err != nil {
			return Response{}, false, err
		}
	}
	if err := keep(resp); err != nil {
		return Response{}, false, err
	}
	return resp, true, nil
}

// errCommitUnknown wraps a failed COMMIT, whose outcome is unknown.
var errCommitUnknown = errors.New("receiver: commit failed, outcome unknown")

// inFlightWait is how many seconds a duplicate should wait for a claim
// it cannot take: the claim's age, so that a request that just started is
// picked up within a second while a claim held longer (more and more likely
// orphaned by a crash) is polled with doubling waits, and never more than the
// claim's remaining time, after which a retry takes it over.
func (rc *Receiver) inFlightWait(rec record) int64 {
	now := rc.opts.Clock().UnixMilli()
	remaining := rec.claimExpires - now
	age := now - (rec.claimExpires - rc.opts.ClaimTTL.Milliseconds())
	secs := (remaining + 999) / 1000 // up: never back before expiry
	if age < remaining {
		secs = age / 1000
	}
	return max(secs, 1)
}

// ErrBadStatus is returned (and answered with 500) when a handler answers
// with a status outside 200..599.
var ErrBadStatus = errors.New("receiver: handler returned an invalid status")

// ErrPanic wraps a panic recovered from a business handler.
var ErrPanic = errors.New("receiver: handler panicked")

func callHandler(ctx context.Context, tx Tx, req *Request, h Handler) (resp Response, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, v, debug.Stack())
		}
	}()
	return h(ctx, tx, req)
}

func headerProblem(err error) Problem {
	switch {
	case errors.Is(err, wire.ErrKeyMissing):
		return probMissingKey
	case errors.Is(err, wire.ErrKeyMalformed):
		return probMalformedKey
	case errors.Is(err, ErrFencePartial):
		p := probMalformedToken
		p.Detail = "Send X-Client-Resource and X-Client-Fencing-Token together, or neither."
		return p
	case errors.Is(err, wire.ErrResourceMalformed):
		p := probMalformedToken
		p.Detail = "X-Client-Resource must be 1-200 characters of letters, digits and -_.:/@."
		return p
	default:
		p := probMalformedToken
		p.Detail = "X-Client-Fencing-Token must be a decimal integer in 1..2^53-1 without leading zeros."
		return p
	}
}

// shortHash identifies a scope in logs without writing the user id itself.
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// now is a helper for the reaper and fence code.
func (rc *Receiver) now() time.Time { return rc.opts.Clock() }
