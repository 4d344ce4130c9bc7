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
	RecordID string // X-Client-Operation-Id
	User     string
	Hash     string
	Token    uint64
	At       time.Time
}

type stored struct {
	hash   string
	status int
	body   string
}

// Server is the simulated receiver, following the contract of wire:
// 401 before anything; storms answer 503/429 before processing; a malformed
// key or token is 400, an unissued token 400; a token below the highest
// accepted is 409 with X-Fencing-Highest; a known key with the same payload
// replays the stored answer (Idempotent-Replayed), with another payload 422.
// Business outcomes are chosen by the payload: "bad" -> 422, "conflict" -> 409.
type Server struct {
	issued, accepted map[string]uint64
	keys             map[string]stored // user + "\x00" + key
	Effects          []Effect
	AuthExpired      map[string]bool
	StormUntil       time.Time
	StormStatus      int // 503 or 429
	StormRetryAfter  string
	Requests         int
	breakIdem        bool // test of the checker: apply every request
	breakSession     bool // test of the checker: no session check (X-Client-User ignored)
}

// NewServer returns an empty receiver.
func NewServer() *Server {
	return &Server{issued: map[string]uint64{}, accepted: map[string]uint64{}, keys: map[string]stored{}, AuthExpired: map[string]bool{}}
}

// Issue is POST /fence/{resource}: a new, higher fencing token.
func (s *Server) Issue(resource string) uint64 {
	s.issued[resource]++
	return s.issued[resource]
}

func problem(status int, typ string) outbox.Response {
	return outbox.Response{Status: status, Header: outbox.Header{"Content-Type": wire.ContentTypeProblem}, Body: []byte(`{"type":"` + typ + `"}`)}
}

// Handle answers one request sent with the given session user.
func (s *Server) Handle(now time.Time, user string, req outbox.Request) outbox.Response {
	s.Requests++
	if user == "" || s.AuthExpired[user] {
		return problem(401, wire.ProblemUnauthenticated)
	}
	if cu, ok := req.Header[wire.HeaderClientUser]; ok && cu != wire.FormatClientUser(user) && !s.breakSession {
		return problem(403, wire.ProblemSessionMismatch)
	}
	if now.Before(s.StormUntil) {
		r := problem(s.StormStatus, wire.ProblemInternal)
		if s.StormRetryAfter != "" {
			r.Header[wire.HeaderRetryAfter] = s.StormRetryAfter
		}
		return r
	}
	key, err := wire.ParseIdempotencyKey(req.Header.Get(wire.HeaderIdempotencyKey))
	if err != nil {
		return problem(400, wire.ProblemMalformedKey)
	}
	res := req.Header.Get(wire.HeaderResource)
	tok, err := wire.ParseToken(req.Header.Get(wire.HeaderFencingToken))
	if err != nil || !wire.ValidResource(res) {
		return problem(400, wire.ProblemMalformedToken)
	}
	if tok > s.issued[res] {
		return problem(400, wire.ProblemForgedToken)
	}
	if tok < s.accepted[res] {
		r := problem(409, wire.ProblemStaleToken)
		r.Header[wire.HeaderFencingHighest] = wire.FormatToken(s.accepted[res])
		return r
	}
	s.accepted[res] = tok
	hash := queue.HashPayload(req.Body)
	k := user + "\x00" + key
	if st, ok := s.keys[k]; ok && !s.breakIdem {
		if st.hash != hash {
			return problem(422, wire.ProblemKeyReuse)
		}
		return outbox.Response{Status: st.status, Header: outbox.Header{wire.HeaderReplayed: "true"}, Body: []byte(st.body)}
	}
	body := string(req.Body)
	var st stored
	switch {
	case strings.Contains(body, "bad"):
		st = stored{hash: hash, status: 422, body: `{"type":"validation"}`}
	case strings.Contains(body, "conflict"):
		st = stored{hash: hash, status: 409, body: `{"type":"` + wire.ProblemConflict + `"}`}
	default:
		s.Effects = append(s.Effects, Effect{Key: key, RecordID: req.Header.Get(wire.HeaderOperationID), User: user, Hash: hash, Token: tok, At: now})
		st = stored{hash: hash, status: 201, body: `{"effect":` + strconv.Itoa(len(s.Effects)) + `}`}
	}
	s.keys[k] = st
	return outbox.Response{Status: st.status, Body: []byte(st.body)}
}
