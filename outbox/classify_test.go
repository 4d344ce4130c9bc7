package outbox

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/wire"
)

func TestClassifyTable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		status int
		header Header
		body   string
		want   wire.Outcome
	}{
		{200, nil, "", wire.OutcomeAck}, {201, nil, "", wire.OutcomeAck}, {204, nil, "", wire.OutcomeAck},
		{408, nil, "", wire.OutcomeRetry}, {425, nil, "", wire.OutcomeRetry}, {429, nil, "", wire.OutcomeRetry},
		{500, nil, "", wire.OutcomeRetry}, {502, nil, "", wire.OutcomeRetry}, {503, nil, "", wire.OutcomeRetry},
		{401, nil, "", wire.OutcomeAuth},
		{400, nil, "", wire.OutcomeTerminal}, {403, nil, "", wire.OutcomeTerminal}, {404, nil, "", wire.OutcomeTerminal},
		{413, nil, "", wire.OutcomeTerminal}, {422, nil, "", wire.OutcomeTerminal},
		{409, Header{"x-fencing-highest": "9"}, "", wire.OutcomeStale},
		{409, nil, `{"type":"` + wire.ProblemConflict + `"}`, wire.OutcomeConflict},
		{409, nil, `{"type":"` + wire.ProblemInFlight + `"}`, wire.OutcomeRetry},
		{403, nil, `{"type":"` + wire.ProblemSessionMismatch + `"}`, wire.OutcomeSession},
		{403, nil, `{"type":"` + wire.ProblemBase + `forbidden"}`, wire.OutcomeTerminal},
		{400, nil, `{"type":"` + wire.ProblemSessionMismatch + `"}`, wire.OutcomeTerminal},
	}
	for _, c := range cases {
		v := Classify(Response{Status: c.status, Header: c.header, Body: []byte(c.body)}, nil, now)
		require.Equal(t, c.want, v.Outcome, c.status)
	}
	v := Classify(Response{}, errors.New("connection reset"), now)
	require.Equal(t, wire.OutcomeRetry, v.Outcome)
	require.Equal(t, "network", v.Err.Code)
	v = Classify(Response{Status: 409, Header: Header{wire.HeaderFencingHighest: "42"}}, nil, now)
	require.Equal(t, uint64(42), v.Highest)
	v = Classify(Response{Status: 429, Header: Header{"Retry-After": "7"}}, nil, now)
	require.True(t, v.HasRetry)
	require.Equal(t, 7*time.Second, v.RetryAfter)
	v = Classify(Response{Status: 503, Header: Header{"retry-after": now.Add(time.Minute).Format("Mon, 02 Jan 2006 15:04:05 GMT")}}, nil, now)
	require.Equal(t, time.Minute, v.RetryAfter)
	require.Equal(t, "http_503", v.Err.Code)
}
