package upload

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/tabfence/tabfence/wire"
)

// Whatever a client sends as Upload-Metadata, parseMeta never panics and
// accepts only a valid key and a 64-digit lowercase sha256.
func FuzzParseMeta(f *testing.F) {
	b := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	sha := hex.EncodeToString(make([]byte, 32))
	for _, seed := range []string{
		"key " + b("k") + ",sha256 " + b(sha),
		"key " + b("k") + ",sha256 " + b(sha) + ",filename " + b("a.jpg"),
		"key !!!", "key,sha256", ",,,", "key " + b("k") + " x", "key " + b("k") + "=",
		"key " + b("k") + ",key " + b("j"), "\x00 \xff", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m, err := parseMeta(http.Header{"Upload-Metadata": {v}})
		if err != nil {
			return
		}
		if !wire.ValidKey(m.Key) || len(m.SHA256) != 64 || !validFilename(m.Filename) {
			t.Fatalf("accepted %q as %+v", v, m)
		}
		if _, err := hex.DecodeString(m.SHA256); err != nil || hex.EncodeToString(mustHex(m.SHA256)) != m.SHA256 {
			t.Fatalf("sha256 %q not lowercase hex", m.SHA256)
		}
	})
}

func mustHex(s string) []byte { b, _ := hex.DecodeString(s); return b }
