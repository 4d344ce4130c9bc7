//go:build js && wasm

package jsapi

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"
)

func eval(src string) js.Value { return js.Global().Call("eval", src) }

func TestArgOfReadsEveryKind(t *testing.T) {
	cases := map[string]Kind{
		"undefined": KindUndefined, "null": KindNull, "true": KindBoolean, "1.5": KindNumber,
		"'s'": KindString, "Symbol()": KindSymbol, "({})": KindObject, "[]": KindObject,
		"(() => 1)": KindFunction, "1n": KindBigInt,
	}
	for src, want := range cases {
		require.Equal(t, want, ArgOf(eval(src)).Kind, src)
	}
	require.Equal(t, "x", ArgOf(eval("'x'")).Str)
	require.Equal(t, 1.0, ArgOf(eval("true")).Num, "true reads as 1")
	require.Equal(t, 0.0, ArgOf(eval("false")).Num)
}

type thing struct{ n int }

func (x *thing) get([]js.Value) (any, error) { return x.n, nil }

func (x *thing) fail([]js.Value) (any, error) { return nil, &TypeError{"tabfence.x: bad"} }

// A method table's callbacks are shared by every object (bound to its
// handle), a released object's methods answer with the table's error or
// their idle value, and a sync method's error comes back marked to be
// thrown.
func TestObjectsShareCallbacksByHandle(t *testing.T) {
	var things Objects[*thing]
	gone := &TypeError{"tabfence.x: gone"}
	things.Define(gone,
		Method[*thing]{Name: "n", Call: Getter, Fn: (*thing).get, Idle: -1},
		Method[*thing]{Name: "get", Call: Sync, Fn: (*thing).get},
		Method[*thing]{Name: "fail", Call: Sync, Fn: (*thing).fail},
		Method[*thing]{Name: "later", Call: Async, Fn: (*thing).get},
	)
	a, b := NewObject(), NewObject()
	ida := things.Add(&thing{1})
	things.Install(a, ida)
	things.Install(b, things.Add(&thing{2}))
	require.Equal(t, 1, a.Get("n").Int())
	require.Equal(t, 2, b.Call("get").Int())
	e := a.Call("fail")
	require.Equal(t, "TypeError", e.Get("name").String())
	require.True(t, JSReflect.Call("get", e, SymThrow).Truthy(), "a sync error is marked to be thrown")
	require.True(t, JSReflect.Call("get", a.Get("later"), SymAsync).Truthy(), "an async method is marked async")
	require.True(t, JSReflect.Call("get", a.Get("later"), SymThrow).IsUndefined())
	things.Remove(ida)
	require.Equal(t, -1, a.Get("n").Int(), "a released object's getter gives its idle value")
	require.Equal(t, "tabfence.x: gone", a.Call("get").Get("message").String())
	require.Equal(t, 2, b.Get("n").Int(), "the other object is untouched")
}
