//go:build js && wasm

package jsglue

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFieldNeverPanics(t *testing.T) {
	for _, src := range []string{"undefined", "null", "1n", "'s'", "({get scope() { throw new Error('no') }})", "new Proxy({}, {get() { throw 1 }})"} {
		require.True(t, Field(eval(src), "scope").IsUndefined(), "%s.scope", src)
	}
	require.Equal(t, "x", Field(eval("({scope: 'x'})"), "scope").String())
}

func TestTypeOfBigInt(t *testing.T) {
	_, ok := TypeOf(eval("1n"))
	require.False(t, ok)
	ty, ok := TypeOf(eval("'s'"))
	require.True(t, ok)
	require.Equal(t, js.TypeString, ty)
}

func TestArrayReadersDistrustLength(t *testing.T) {
	require.True(t, IsArray(eval("[1]")))
	require.False(t, IsArray(eval("({length: 1})")))
	for src, want := range map[string]int{"[1, 2]": 2, "({length: -1})": 0, "({length: NaN})": 0, "({length: 1e12})": 1 << 20, "5": 0, "1n": 0} {
		require.Equal(t, want, Len(eval(src)), src)
	}
	require.True(t, Index(eval("new Proxy([1], {get() { throw 1 }})"), 0).IsUndefined())
	require.Equal(t, 2, Index(eval("[1, 2]"), 1).Int())
}
