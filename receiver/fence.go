package receiver

import (
	"context"
	"errors"

	"net/http"
	"strings"

	"github.com/tabfence/tabfence/wire"
)

// Error implements error so a *Problem can travel up as an error.
func (p *Problem) Error() string { return "receiver: " + p.Title }

// Errors returned by IssueToken and the fence check; use errors.Is.
var (
	ErrStaleToken  = errors.New("receiver: stale fencing token")
	ErrForgedToken = errors.New("receiver: fencing token never issued")
	ErrTokensSpent = errors.New("receiver: fencing tokens exhausted for resource")
	ErrBadResource = wire.ErrResourceMalformed
)

// checkFence accepts token for (scope, resource) when it is not lower than
// the highest accepted and not higher than the highest issued, and raises
// highest_accepted to it in tx. A rejection is returned as a *Problem.
func (rc *Receiver) checkFence(ctx context.Context, tx Tx, scope, resource string, token uint64) error {
	t := int64(token)
	n, err := tx.Exec(ctx, `UPDATE tabfence_fences
		SET highest_accepted = CASE WHEN highest_accepted < CAST($3 AS BIGINT) THEN CAST($3 AS BIGINT) ELSE highest_accepted END,
		    updated = $4
		WHERE scope = $1 AND resource = $2 AND highest_accepted <= CAST($3 AS BIGINT) AND issued >= CAST($3 AS BIGINT)`,
		scope, resource, t, rc.now().UnixMilli())
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	var issued, highest int64
	err = tx.QueryRow(ctx, `SELECT issued, highest_accepted FROM tabfence_fences WHERE scope = $1 AND resource = $2`,
		scope, resource).Scan(&issued, &highest)
	if err != nil && !errors.Is(err, ErrNoRows) {
		return err
	}
	if t > issued {
		return &probForged
	}
	p := staleProblem(uint64(highest))
	return &p
}

// precheckFence reads the fence and returns a *Problem when token is stale
// or was never issued; it writes nothing.
func precheckFence(ctx context.Context, q Tx, scope, resource string, token uint64) (rejection, err error) {
	var issued, highest int64
	err = q.QueryRow(ctx, `SELECT issued, highest_accepted FROM tabfence_fences WHERE scope = $1 AND resource = $2`,
		scope, resource).Scan(&issued, &highest)
	if err != nil && !errors.Is(err, ErrNoRows) {
		return nil, err
	}
	switch t := int64(token); {
	case t > issued:
		return &probForged, nil
	case t < highest:
		p := staleProblem(uint64(highest))
		return &p, nil
	}
	return nil, nil
}

// IssueToken returns the next fencing token for (scope, resource): one more
// than any issued before, committed before it is returned, so tokens are
// monotonic, never reused and survive a restart.
func (rc *Receiver) IssueToken(ctx context.Context, scope, resource string) (uint64, error) {
	if !wire.ValidResource(resource) {
		return 0, ErrBadResource
	}
	tx, err := rc.store.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var tok int64
	err = tx.QueryRow(ctx, `INSERT INTO tabfence_fences (scope, resource, issued, highest_accepted, updated)
		VALUES ($1, $2, 1, 0, $3)
		ON CONFLICT (scope, resource) DO UPDATE SET issued = tabfence_fences.issued + 1, updated = $3
		WHERE tabfence_fences.issued < $4
		RETURNING issued`, scope, resource, rc.now().UnixMilli(), int64(wire.MaxToken)).Scan(&tok)
	if errors.Is(err, ErrNoRows) {
		return 0, ErrTokensSpent
	}
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return uint64(tok), nil
}

// FenceHandler serves POST /fence/{resource}: it issues the caller's next
// token for the resource as {"resource": "...", "token": N}. Mount it on a
// pattern with a {resource...} wildcard, or on the "/fence/" prefix.
func (rc *Receiver) FenceHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.armBodyDeadline(w, r) // bounds net/http's discard of a body left unread
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeProblem(w, probMethod)
			return
		}
		scope, err := rc.opts.Scope(r)
		if err != nil || scope == "" || !ValidText(scope) {
			writeProblem(w, probUnauthenticated)
			return
		}
		res := r.PathValue("resource")
		if res == "" {
			res = strings.TrimPrefix(r.URL.Path, "/fence/")
		}
		if p := rc.discardBody(w, r); p != nil {
			writeBodyProblem(w, *p)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), rc.opts.Timeout)
		defer cancel()
		tok, err := rc.IssueToken(ctx, scope, res)
		switch {
		case errors.Is(err, ErrBadResource):
			p := probMalformedToken
			p.Title = "Resource name malformed"
			p.Detail = "A resource is 1-200 characters of letters, digits and -_.:/@."
			writeProblem(w, p)
			return
		case err != nil:
			rc.log.Error("issue fencing token", "err", err)
			writeProblem(w, Problem{Type: wire.ProblemInternal, Title: "Internal server error", Status: http.StatusInternalServerError,
				Detail: "No token was returned; retrying is safe (a token lost this way is never reused)."})
			return
		}
		resp, _ := JSON(http.StatusOK, struct {
			Resource string `json:"resource"`
			Token    uint64 `json:"token"`
		}{res, tok})
		resp.Header.Set("Cache-Control", "no-store")
		writeResponse(w, resp)
	})
}
