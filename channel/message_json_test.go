package channel

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMessageJSONIsTheSubscribersObject(t *testing.T) {
	m := Message{Envelope: Envelope{ID: "i\"d", Kind: "k\n", Resource: "r", Owner: "o", Token: 7, Seq: 2, SentAt: 1700}, Gap: true}
	var got map[string]any
	require.NoError(t, json.Unmarshal(AppendMessageJSON(nil, m), &got))
	require.Equal(t, map[string]any{"id": "i\"d", "kind": "k\n", "payload": nil, "token": 7.0, "seq": 2.0,
		"resource": "r", "owner": "o", "sentAt": 1700.0, "gap": true}, got)
	require.Equal(t, `{"id":"x","token":9,"seq":3}`, string(AppendReceiptJSON(nil, Envelope{ID: "x", Token: 9, Seq: 3})))
}
