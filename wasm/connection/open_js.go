//go:build js && wasm && !tabfence_core && !tabfence_noconnection

package connection

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/realtime/browser"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// Open implements tf.connection(options): it reads the options (their
// rules are jsapi's, connectionargs.go), opens the connection and returns
// the page's object for it (its methods are in api_js.go).
func Open(args []js.Value) (any, error) {
	cfg, err := readConnectionOptions(jsapi.At(args, 0))
	if err != nil {
		return nil, err
	}
	conn, err := browser.Open(context.Background(), cfg)
	if err != nil {
		return nil, connErr(err)
	}
	c := &connHandle{conn: conn}
	c.id = connections.Add(c)
	names := conn.Names()
	obj := jsapi.NewObject()
	jsapi.DefineConst(obj, "scope", cfg.Scope)
	jsapi.DefineConst(obj, "protocol", cfg.Protocol)
	jsapi.DefineConst(obj, "lockName", names.Lock)
	jsapi.DefineConst(obj, "database", names.Database)
	connections.Install(obj, c.id)
	return obj, nil
}

// readConnectionOptions reads tf.connection's options into a
// browser.Config: every field into a jsapi.Arg, judged by
// jsapi.ValidateConnection.
func readConnectionOptions(opts js.Value) (browser.Config, error) {
	f := func(v js.Value, name string) jsapi.Arg { return jsapi.ArgOf(jsapi.Field(v, name)) }
	a := jsapi.ConnectionArgs{Options: jsapi.ArgOf(opts)}
	if a.Options.Kind == jsapi.KindObject {
		a.Scope, a.Protocol, a.URL = f(opts, "scope"), f(opts, "protocol"), f(opts, "url")
		a.User, a.FencePath, a.Snapshot = f(opts, "user"), f(opts, "fencePath"), f(opts, "snapshot")
		a.PingEveryMs, a.PongTimeoutMs = f(opts, "pingEveryMs"), f(opts, "pongTimeoutMs")
		a.StallAfterMs, a.HiddenNotifyMs = f(opts, "stallAfterMs"), f(opts, "hiddenNotifyMs")
		backoff := jsapi.Field(opts, "backoff")
		a.Backoff = jsapi.ArgOf(backoff)
		if a.Backoff.Kind == jsapi.KindObject {
			a.BackoffBase, a.BackoffCap = f(backoff, "base"), f(backoff, "cap")
		}
		replica := jsapi.Field(opts, "replica")
		a.Replica = jsapi.ArgOf(replica)
		if a.Replica.Kind == jsapi.KindObject {
			a.Version = f(replica, "version")
			readStores(jsapi.Field(replica, "stores"), &a)
		}
	}
	cfg, urlIsFunc, err := jsapi.ValidateConnection(a)
	if err != nil {
		return cfg, err
	}
	if urlIsFunc {
		cfg.URL = urlFunc(jsapi.Field(opts, "url"))
	}
	return cfg, nil
}

// readStores reads replica.stores: an array, of which at most one element
// more than the limit is read (a forged length must not keep the tab here).
func readStores(stores js.Value, a *jsapi.ConnectionArgs) {
	if !jsglue.IsArray(stores) {
		return
	}
	a.StoresIsArray = true
	n := min(jsglue.Len(stores), jsapi.MaxReplicaStores+1)
	for i := range n {
		a.Stores = append(a.Stores, jsapi.ArgOf(jsglue.Index(stores, i)))
	}
}

var errURLResult = errors.New("tabfence.connection: url() must return (or resolve to) a non-empty string")

// urlFunc is Config.URL for a url function: called at each dial, its
// result (or what its promise resolves to) is the URL of that dial. A throw
// or a rejection is that dial's failure.
func urlFunc(fn js.Value) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		v, err := jsglue.Invoke(fn)
		if err != nil {
			return "", err
		}
		// The dial's context: a url() that never settles ends with the
		// dial, leaving no goroutine behind.
		if v, err = jsglue.Await(ctx, v); err != nil {
			return "", err
		}
		if !jsapi.IsType(v, js.TypeString) || v.String() == "" {
			return "", errURLResult
		}
		return v.String(), nil
	}
}
