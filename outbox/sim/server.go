package sim

import (
	"strconv"
	"strings"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// Effect is one mutation the simulated receiver applied.
type Effect struct {
	Key      string // idempotency key
	RecordID string // X-Client-Operation-Id, or the batch mutation's id
	User     string
	Hash     string // of the payload
	Token    uint64
	At       time.Time
	Batch    bool // applied as a mutation of a batch
}

type stored struct {
	fingerprint string // endpoint and payload hash, as the receiver's
	status      int
	body        string
}

// Server is the simulated receiver, following the contract of wire:
// 401 before anything; storms answer 503/429 before processing; a malformed
// key or token is 400, an unissued token 400; a token below the highest
// accepted is 409 with X-Fencing-Highest; a known key with the same
// fingerprint (endpoint and payload) replays the stored answer
// (Idempotent-Replayed), with another one 422. Business outcomes are chosen
// by the payload: "bad" -> 422, "conflict" -> 409. BatchEndpoint answers
// the batch format (see HandleBatch).
type Server struct {
	issued, accepted map[string]uint64
	keys             map[string]stored // user + "\x00" + key
	Effects          []Effect
	AuthExpired      map[string]bool
	StormUntil       time.Time
	StormStatus      int // 503 or 429
	StormRetryAfter  string
	Requests         int
	// BatchEndpoint is the route of the batch format; MaxBatch its limit
	// (413 above). NoBatch makes the route answer 404, as a server that
	// does not speak the format.
	BatchEndpoint string
	MaxBatch      int
	NoBatch       bool
	// MaxBody, when set, refuses a longer batch body with 413 body-too-large.
	MaxBody         int
	breakIdem       bool // test of the checker: apply every request
	breakSession    bool // test of the checker: no session check (X-Client-User ignored)
	breakEntityStop bool // test of the checker: a batch's failed mutation stops nothing
	// Crossed counts keys sent both alone and in a batch.
	Crossed int
	sentHow map[string]byte // user + "\x00" + key -> 1 alone, 2 in a batch, 3 both
}

// NewServer returns an empty receiver.
func NewServer() *Server {
	return &Server{issued: map[string]uint64{}, accepted: map[string]uint64{}, keys: map[string]stored{}, AuthExpired: map[string]bool{},
		BatchEndpoint: "/api/commands/batch", MaxBatch: 100}
}

// Issue is POST /fence/{resource}: a new, higher fencing token.
func (s *Server) Issue(resource string) uint64 {
	s.issued[resource]++
	return s.issued[resource]
}

func problem(status int, typ string) outbox.Response {
	return outbox.Response{Status: status, Header: outbox.Header{"Content-Type": wire.ContentTypeProblem}, Body: []byte(`{"type":"` + typ + `"}`)}
}

// admit answers what refuses a request before its content is read:
// authentication, the session check, a storm.
func (s *Server) admit(now time.Time, user string, req outbox.Request) (outbox.Response, bool) {
	s.Requests++
	if user == "" || s.AuthExpired[user] {
		return problem(401, wire.ProblemUnauthenticated), false
	}
	if cu, ok := req.Header[wire.HeaderClientUser]; ok && cu != wire.FormatClientUser(user) && !s.breakSession {
		return problem(403, wire.ProblemSessionMismatch), false
	}
	if now.Before(s.StormUntil) {
		r := problem(s.StormStatus, wire.ProblemInternal)
		if s.StormRetryAfter != "" {
			r.Header[wire.HeaderRetryAfter] = s.StormRetryAfter
		}
		return r, false
	}
	return outbox.Response{}, true
}

// fence parses the fencing headers and checks the token against the
// issued and accepted ones; it does not advance the accepted token.
func (s *Server) fence(req outbox.Request) (res string, tok uint64, refusal outbox.Response, ok bool) {
	res = req.Header.Get(wire.HeaderResource)
	tok, err := wire.ParseToken(req.Header.Get(wire.HeaderFencingToken))
	if err != nil || !wire.ValidResource(res) {
		return "", 0, problem(400, wire.ProblemMalformedToken), false
	}
	if tok > s.issued[res] {
		return "", 0, problem(400, wire.ProblemForgedToken), false
	}
	if tok < s.accepted[res] {
		r := problem(409, wire.ProblemStaleToken)
		r.Header[wire.HeaderFencingHighest] = wire.FormatToken(s.accepted[res])
		return "", 0, r, false
	}
	return res, tok, outbox.Response{}, true
}

// fingerprint is what a key is bound to: the target path and the body, as
// the receiver's (a record sent alone or in a batch is one mutation).
// sent notes how a key was sent, to count the keys sent both ways.
func (s *Server) sent(k string, how byte) {
	if s.sentHow == nil {
		s.sentHow = map[string]byte{}
	}
	old := s.sentHow[k]
	s.sentHow[k] = old | how
	if old != 0 && old != 3 && old|how == 3 {
		s.Crossed++
	}
}

func fingerprint(endpoint string, payload []byte) string {
	return endpoint + " " + queue.HashPayload(payload)
}

// business runs the simulated handler for a new key: the answer to store
// and, for a success, the effect.
func business(payload []byte, effectNo int) (st stored, effect bool) {
	body := string(payload)
	switch {
	case strings.Contains(body, "bad"):
		return stored{status: 422, body: `{"type":"validation"}`}, false
	case strings.Contains(body, "conflict"):
		return stored{status: 409, body: `{"type":"` + wire.ProblemConflict + `"}`}, false
	}
	return stored{status: 201, body: `{"effect":` + strconv.Itoa(effectNo) + `}`}, true
}

// Handle answers one request sent with the given session user.
func (s *Server) Handle(now time.Time, user string, req outbox.Request) outbox.Response {
	if pathOf(req.Endpoint) == pathOf(s.BatchEndpoint) {
		r, _ := s.HandleBatch(now, user, req, BatchFaults{})
		return r
	}
	if r, ok := s.admit(now, user, req); !ok {
		return r
	}
	key, err := wire.ParseIdempotencyKey(req.Header.Get(wire.HeaderIdempotencyKey))
	if err != nil {
		return problem(400, wire.ProblemMalformedKey)
	}
	res, tok, refusal, ok := s.fence(req)
	if !ok {
		return refusal
	}
	s.accepted[res] = tok
	fp := fingerprint(pathOf(req.Endpoint), req.Body)
	k := user + "\x00" + key
	s.sent(k, 1)
	if st, ok := s.keys[k]; ok && !s.breakIdem {
		if st.fingerprint != fp {
			return problem(422, wire.ProblemKeyReuse)
		}
		return outbox.Response{Status: st.status, Header: outbox.Header{wire.HeaderReplayed: "true"}, Body: []byte(st.body)}
	}
	st, effect := business(req.Body, len(s.Effects)+1)
	st.fingerprint = fp
	if effect {
		s.Effects = append(s.Effects, Effect{Key: key, RecordID: req.Header.Get(wire.HeaderOperationID), User: user,
			Hash: queue.HashPayload(req.Body), Token: tok, At: now})
	}
	s.keys[k] = st
	return outbox.Response{Status: st.status, Body: []byte(st.body)}
}
