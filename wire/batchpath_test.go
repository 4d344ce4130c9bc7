package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/wire"
)

func TestBatchPath(t *testing.T) {
	for _, c := range []struct {
		batch, ep, want string
		ok              bool
	}{
		{"/api/batch", "/api/notes?x=1", "/api/notes?x=1", true},
		{"https://app.example/api/batch", "https://APP.example/api/notes?v=2#f", "/api/notes?v=2", true},
		{"https://app.example/api/batch", "https://app.example", "/", true},
		{"https://app.example/api/batch", "https://app.example?q=1", "/?q=1", true},
		{"https://app.example/api/batch", "https://other.example/api/x", "", false},
		{"https://app.example/api/batch", "http://app.example/api/x", "", false},
		{"https://app.example:8443/b", "https://app.example/api/x", "", false},
		{"/api/batch", "https://app.example/api/x", "", false},
		{"/api/batch", "//other.example/x", "", false},
		{"/api/batch", "api/x", "", false},
		// A path goes to the transport's base, not known to be the
		// absolute batch endpoint's origin.
		{"https://other.example/api/batch", "/api/notes", "", false},
		{"https://app.example/b", "https:///x", "", false},
	} {
		got, ok := wire.BatchPath(c.batch, c.ep)
		require.Equal(t, c.ok, ok, c.ep)
		require.Equal(t, c.want, got, c.ep)
	}
}

func TestResolveEndpoint(t *testing.T) {
	require.Equal(t, "https://app.example/app/api/x", wire.ResolveEndpoint("https://app.example/app", "/api/x"))
	require.Equal(t, "/api/x", wire.ResolveEndpoint("", "/api/x"))
	require.Equal(t, "https://other.example/y", wire.ResolveEndpoint("https://app.example/app", "https://other.example/y"))
}
