package connbench

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	rt "github.com/tabfence/tabfence/wire/realtime"
)

// nodeHarness runs rtcodec.js on the cases given on stdin: it decodes the
// hex messages and encodes the hellos and mutations, printing JSON.
const nodeHarness = `
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const hex = (u8) => Buffer.from(u8).toString("hex");
process.stdout.write(JSON.stringify({
  decoded: (input.decode || []).map((h) => {
    try {
      const m = rtCodec.decode(new Uint8Array(Buffer.from(h, "hex")));
      if (m.result) m.result = hex(m.result);
      return m;
    } catch (e) { return { error: e.message }; }
  }),
  hellos: (input.hellos || []).map((h) => hex(rtCodec.hello(h.protocol, h.version, h.user))),
  mutations: (input.mutations || []).map((m) => hex(rtCodec.mutation(m))),
}));
`

type codecCases struct {
	Decode    []string         `json:"decode"`
	Hellos    []map[string]any `json:"hellos"`
	Mutations []map[string]any `json:"mutations"`
}

type codecOut struct {
	Decoded   []map[string]any `json:"decoded"`
	Hellos    []string         `json:"hellos"`
	Mutations []string         `json:"mutations"`
}

func runCodec(t *testing.T, in codecCases) codecOut {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH (make node installs it)")
	}
	script := filepath.Join(t.TempDir(), "codec.js")
	require.NoError(t, os.WriteFile(script, []byte(rtcodecJS+nodeHarness), 0o644))
	b, err := json.Marshal(in)
	require.NoError(t, err)
	cmd := exec.Command(node, script)
	cmd.Stdin = strings.NewReader(string(b))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err)
	var out codecOut
	require.NoError(t, json.Unmarshal(stdout, &out))
	return out
}

func hexOf(m rt.Message) string { return hex.EncodeToString(rt.Encode(m)) }

// TestRawCodecDecodesWhatGoEncodes: the raw baseline reads the server's
// messages as wire/realtime writes them (multi-byte varints, UTF-8
// changes, the largest version) and refuses broken ones.
func TestRawCodecDecodesWhatGoEncodes(t *testing.T) {
	changes := `[{"store":"issues","key":"é-1","value":{"id":"é-1","title":"naïve ✓","done":false}}]`
	delta := rt.Encode(rt.Delta{Version: 300, Prev: 299, Changes: []byte(changes)})
	in := codecCases{Decode: []string{
		hexOf(rt.Ready{Version: 0}),
		hexOf(rt.Ready{Version: 1<<53 - 1, Reset: true}),
		hex.EncodeToString(delta),
		hexOf(rt.Delta{Version: 16384, Prev: 127}),
		hexOf(rt.Ack{ID: "m-1", Status: 201, Replayed: true, Result: []byte(`{"ok":1}`)}),
		hexOf(rt.Reject{ID: "m-2", Problem: rt.Problem{Type: "urn:x", Title: "No", Detail: "d", Status: 409, Highest: 7}, Retry: true}),
		hexOf(rt.Pong{Nonce: 1 << 40}),
		hex.EncodeToString(delta[:len(delta)-1]),         // truncated
		hex.EncodeToString(append(delta, 0)),             // a byte after the last field
		hex.EncodeToString(rt.Encode(rt.Ping{Nonce: 1})), // not one the client reads
	}}
	out := runCodec(t, in)
	want := []map[string]any{
		{"type": "ready", "version": 0.0, "reset": false},
		{"type": "ready", "version": float64(1<<53 - 1), "reset": true},
		{"type": "delta", "version": 300.0, "prev": 299.0, "changes": changes},
		{"type": "delta", "version": 16384.0, "prev": 127.0, "changes": ""},
		{"type": "ack", "id": "m-1", "status": 201.0, "replayed": true, "result": hex.EncodeToString([]byte(`{"ok":1}`))},
		{"type": "reject", "id": "m-2", "retry": true, "problem": map[string]any{"type": "urn:x", "title": "No", "detail": "d", "status": 409.0, "highest": 7.0}},
		{"type": "pong", "nonce": float64(1 << 40)},
		{"error": "rtCodec: truncated"},
		{"error": "rtCodec: bytes after the last field"},
		{"type": "other", "tag": float64(rt.TypePing)},
	}
	require.Equal(t, want, out.Decoded)
}

// TestRawCodecEncodesWhatGoDecodes: the raw baseline's hello and mutations
// are messages the server accepts, field for field.
func TestRawCodecEncodesWhatGoDecodes(t *testing.T) {
	in := codecCases{
		Decode:    []string{},
		Hellos:    []map[string]any{{"protocol": 1, "version": 0, "user": ""}, {"protocol": 1, "version": 1<<53 - 1, "user": "ünï"}},
		Mutations: []map[string]any{{"id": "bench-1", "op": "issue.put", "entity": "issue", "payload": `{"id":"é"}`}},
	}
	out := runCodec(t, in)
	wantHellos := []rt.Hello{{Protocol: 1}, {Protocol: 1, Version: 1<<53 - 1, User: "ünï"}}
	require.Len(t, out.Hellos, len(wantHellos))
	for i, h := range out.Hellos {
		require.Equal(t, wantHellos[i], decodeHex(t, h))
	}
	require.Len(t, out.Mutations, 1)
	require.Equal(t, rt.Mutation{ID: "bench-1", Op: "issue.put", Entity: "issue", Payload: []byte(`{"id":"é"}`)},
		decodeHex(t, out.Mutations[0]))
}

func decodeHex(t *testing.T, h string) rt.Message {
	t.Helper()
	b, err := hex.DecodeString(h)
	require.NoError(t, err)
	m, err := rt.Decode(b, 0)
	require.NoError(t, err)
	return m
}
