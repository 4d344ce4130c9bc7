//go:build !(js && wasm)

package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/outbox/queue"
)

// tabfence-sw.js answers the sync events whose tag starts with its
// TAG_PREFIX: that must be how every queue's sync tag (its lock name,
// queue.Names) starts, at every protocol, and nothing else's (an
// election's lock of the same scope is not an outbox).
func TestSWTagPrefixMatchesGo(t *testing.T) {
	src, err := os.ReadFile("../jsglue/loader/tabfence-sw.js")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^const TAG_PREFIX = "([^"]+)";$`).FindSubmatch(src)
	require.NotNil(t, m, "tabfence-sw.js declares TAG_PREFIX")
	prefix := string(m[1])
	for _, c := range []struct {
		name     string
		protocol int
	}{{"notes", 1}, {"notes", 7}, {"a:b", 2}} {
		n, err := queue.Names(c.name, c.protocol)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(n.Lock, prefix), "%s does not start with %q", n.Lock, prefix)
		election, err := locks.Name(c.name, c.protocol)
		require.NoError(t, err)
		require.False(t, strings.HasPrefix(election, prefix), "an election's lock %s has the outbox's prefix", election)
	}
}
