package swbench

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/wire"
)

// The figures count a send as a mutation's effect only when the server
// answered it 2xx and not from its idempotency record: a replay or a
// failure is a send beyond one, and the timing waits for effects only.
func TestArrivalsTellEffectsFromReplaysAndFailures(t *testing.T) {
	answers := map[string]func(http.ResponseWriter){
		"effect":      func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated) },
		"implicit":    func(w http.ResponseWriter) { _, _ = w.Write([]byte("{}")) },
		"replay":      func(w http.ResponseWriter) { w.Header().Set(wire.HeaderReplayed, "true"); w.WriteHeader(http.StatusOK) },
		"unavailable": func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) },
	}
	a := &arrivals{}
	h := a.middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := answers[r.URL.Query().Get("a")]; f != nil {
			f(w)
		}
	}))
	do := func(method, target string) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, target, nil))
	}
	do("POST", "/fence/notes")
	for _, k := range []string{"effect", "implicit", "replay", "unavailable"} {
		do("POST", "/api/notes?a="+k)
	}
	do("GET", "/api/notes?a=effect") // a read is no send
	do("POST", "/api/other?a=effect")

	got := a.snapshot()
	assert.Len(t, got.fences, 1)
	assert.Len(t, got.sends, 4)
	assert.Len(t, got.effects, 2, "201 and an implicit 200 are effects")
	assert.Equal(t, 1, got.replays)
	assert.Equal(t, 1, got.failed)
	assert.Equal(t, 2, a.extraSince())
	assert.Equal(t, 2, a.extraSends())

	a.reset()
	require.Equal(t, 0, a.extraSince(), "a reset starts the flush's window")
	assert.Equal(t, 2, a.extraSends(), "the whole part's count is never reset")
}
