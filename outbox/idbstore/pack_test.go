package idbstore

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox/queue"
)

// pack.js reads exactly the top-level fields appendRecordJSON writes, each
// into a slot of its kind: a field added to the stored record but not to
// packNumbers or packStrings (or the other way round) fails here, before
// its value silently stays behind in the packed read.
func TestPackFieldsMatchRecord(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	rec := queue.Record{
		ID: "i", OperationKey: "k", IdempotencyKey: "ik", EntityType: "e", EntityID: "1", OperationType: "op",
		PayloadRef: "r", PayloadHash: "h", PayloadSchemaVersion: 2, Status: queue.StatusFailed, Attempts: 1,
		Sends: 2, MaxAttempts: 3, NextAttemptAt: at, LeaseOwner: "o", LeaseToken: 4, LeaseExpiresAt: at,
		DependencyIDs: []string{"d"}, Seq: 5, CreatedAt: at, UpdatedAt: at, AckedAt: at, UserID: "u",
		TenantID: "t", AuthGeneration: 6,
	}
	var stored map[string]any
	require.NoError(t, json.Unmarshal(appendRecordJSON(nil, &rec, false), &stored))
	var numbers, texts []string
	for k, v := range stored {
		switch {
		case strings.HasPrefix(k, "_"): // derived index fields, never read back
		case k == "dependencyIds":
			require.IsType(t, []any{}, v)
		default:
			switch v.(type) {
			case float64:
				numbers = append(numbers, k)
			case string:
				texts = append(texts, k)
			default:
				t.Fatalf("field %s: %T, a kind pack.js has no slot for", k, v)
			}
		}
	}
	require.ElementsMatch(t, packNumbers[:], numbers, "number slots")
	require.ElementsMatch(t, packStrings[:], texts, "string slots")
	// The nested and list fields, which appendRecordJSON leaves to its
	// caller, are read by pack.js under these names.
	for _, f := range []string{"v.payload", "v.lastError", "v.response", "v.dependencyIds", "r.code", "r.message", "r.status", "r.at", "q.status", "q.replayed", "q.body"} {
		require.Contains(t, packJS, f)
	}
	// pack.js holds no copy of the tables Go hands it.
	for _, f := range slices.Concat(packNumbers[:], packStrings[:]) {
		require.NotContains(t, packJS, `"`+f+`"`)
	}
}
