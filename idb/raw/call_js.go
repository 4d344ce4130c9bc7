//go:build js && wasm

package raw

import (
	"errors"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// The layer's calls into JavaScript, and the strings and scopes it
// converts once.

// call calls method m of v, turning a thrown exception into a *jsglue.JSError
// that keeps its name. No closure, so no allocation beyond the arguments.
func call(v js.Value, m string, args ...any) (r js.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = js.Undefined(), panicError(p)
		}
	}()
	return v.Call(m, args...), nil
}

func panicError(p any) error {
	switch e := p.(type) {
	case js.Error:
		return jsglue.FromJS(e.Value)
	case *js.ValueError:
		return jsglue.NewJSError("TypeError", e.Error())
	case error:
		return e
	case string:
		return errors.New(e)
	}
	return errors.New("idb: panic in a JavaScript call")
}

// Strings and store scopes are converted to JavaScript once: a transaction
// names the same few stores again and again. The caches are bounded so that
// arbitrary names cannot grow them without limit.
const maxCached = 256

var (
	cacheMu    sync.Mutex
	strCache   = map[string]js.Value{}
	scopeCache = map[string]js.Value{}
)

// JSString is s as a JavaScript string, converted once for the names and
// keys a program passes again and again (a bounded cache).
func JSString(s string) js.Value { return jsString(s) }

func jsString(s string) js.Value {
	cacheMu.Lock()
	v, ok := strCache[s]
	cacheMu.Unlock()
	if ok {
		return v
	}
	v = js.ValueOf(s)
	cacheMu.Lock()
	if len(strCache) < maxCached {
		strCache[s] = v
	}
	cacheMu.Unlock()
	return v
}

// ScopeOf returns the JavaScript value naming stores for db.transaction
// (BeginScope): the name itself for one store, a cached array for several.
func ScopeOf(stores []string) js.Value { return scopeOf(stores) }

func scopeOf(stores []string) js.Value {
	if len(stores) == 1 {
		return jsString(stores[0])
	}
	key := scopeKey(stores)
	cacheMu.Lock()
	v, ok := scopeCache[key]
	cacheMu.Unlock()
	if ok {
		return v
	}
	v = js.Global().Get("Array").New(len(stores))
	for i, s := range stores {
		v.SetIndex(i, jsString(s))
	}
	cacheMu.Lock()
	if len(scopeCache) < maxCached {
		scopeCache[key] = v
	}
	cacheMu.Unlock()
	return v
}

// scopeKey is the cache key of a scope: each name after its length, so
// that no two lists of names share a key whatever bytes the names hold.
func scopeKey(stores []string) string {
	n := 0
	for _, s := range stores {
		n += len(s) + 4
	}
	b := make([]byte, 0, n)
	for _, s := range stores {
		l := uint32(len(s))
		b = append(append(b, byte(l), byte(l>>8), byte(l>>16), byte(l>>24)), s...)
	}
	return string(b)
}
